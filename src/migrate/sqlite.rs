//! The SQLite side of `pith migrate`: read a table in batches, write one.

use std::path::Path;

use anyhow::Context;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::rows::{BATCH, Row, Tally, Value};

/// Opens an existing database without changing it.
pub fn open_source(path: &Path) -> anyhow::Result<Connection> {
    anyhow::ensure!(path.is_file(), "{} does not exist", path.display());
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .with_context(|| format!("cannot open {}", path.display()))
}

/// A table's columns, in schema order.
pub fn columns(db: &Connection, table: &str) -> anyhow::Result<Vec<String>> {
    let mut stmt = db.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
    let cols = stmt.query_map([], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
    anyhow::ensure!(!cols.is_empty(), "the SQLite database has no table {table}: is it a Pith database?");
    Ok(cols)
}

/// Reads every row of `table` (columns `cols`), handing batches to `sink`;
/// returns the tally of what it read.
pub fn read(
    db: &Connection,
    table: &str,
    cols: &[String],
    mut sink: impl FnMut(Vec<Row>) -> anyhow::Result<()>,
) -> anyhow::Result<Tally> {
    let mut stmt = db.prepare(&format!("SELECT {} FROM {table}", quoted(cols)))?;
    let mut rows = stmt.query([])?;
    let mut tally = Tally::default();
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(r) = rows.next()? {
        let mut row = Vec::with_capacity(cols.len());
        for (i, col) in cols.iter().enumerate() {
            row.push(match r.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => Value::Int(n),
                ValueRef::Real(f) => Value::Real(f),
                ValueRef::Text(t) => Value::Text(
                    String::from_utf8(t.to_vec()).with_context(|| format!("{table}.{col}: text is not UTF-8"))?,
                ),
                ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        tally.add(&row);
        batch.push(row);
        if batch.len() == BATCH {
            sink(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))?;
        }
    }
    if !batch.is_empty() {
        sink(batch)?;
    }
    Ok(tally)
}

/// Rows in `table` now.
pub fn count(db: &Connection, table: &str) -> anyhow::Result<u64> {
    Ok(db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get::<_, i64>(0))? as u64)
}

/// Inserts `rows` into `table` inside the caller's transaction.
pub fn write(db: &Connection, table: &str, cols: &[String], rows: &[Row]) -> anyhow::Result<()> {
    let marks = vec!["?"; cols.len()].join(", ");
    let mut stmt = db.prepare_cached(&format!("INSERT INTO {table} ({}) VALUES ({marks})", quoted(cols)))?;
    for row in rows {
        let params = row.iter().map(|v| match v {
            Value::Null => rusqlite::types::Value::Null,
            Value::Int(n) => rusqlite::types::Value::Integer(*n),
            Value::Real(f) => rusqlite::types::Value::Real(*f),
            Value::Text(s) => rusqlite::types::Value::Text(s.clone()),
            Value::Blob(b) => rusqlite::types::Value::Blob(b.clone()),
        });
        stmt.execute(rusqlite::params_from_iter(params)).with_context(|| format!("cannot insert into {table}"))?;
    }
    Ok(())
}

pub fn quoted(cols: &[String]) -> String {
    cols.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ")
}
