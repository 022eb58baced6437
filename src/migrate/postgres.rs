//! The PostgreSQL side of `pith migrate`: read a table as a stream, write
//! one in multi-row INSERTs, move the id sequences on.

use std::collections::{HashMap, HashSet};

use anyhow::Context;
use futures_util::TryStreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, NoTls};

use super::rows::{BATCH, Row, Tally, Value};

pub async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .with_context(|| format!("cannot connect to {}", crate::settings::redact_url(url)))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::warn!(error = %e, "postgres connection ended");
        }
    });
    Ok(client)
}

/// Checks that `table` has every column of `cols` (generated columns, such
/// as the search vectors, are PostgreSQL's own and not copied).
pub async fn check_columns(c: &impl GenericClient, table: &str, cols: &[String]) -> anyhow::Result<()> {
    let rows = c
        .query(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER'",
            &[&table],
        )
        .await?;
    let have: HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
    anyhow::ensure!(!have.is_empty(), "the PostgreSQL database has no table {table}");
    let want: HashSet<String> = cols.iter().cloned().collect();
    anyhow::ensure!(
        have == want,
        "table {table} has columns {:?} in PostgreSQL but {:?} in SQLite: are both at the same Pith version?",
        sorted(&have),
        sorted(&want)
    );
    Ok(())
}

fn sorted(s: &HashSet<String>) -> Vec<&String> {
    let mut v: Vec<_> = s.iter().collect();
    v.sort();
    v
}

pub async fn count(c: &impl GenericClient, table: &str) -> anyhow::Result<u64> {
    let n: i64 = c.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await?.get(0);
    Ok(n as u64)
}

/// Streams every row of `table` to `sink` in batches; returns the tally.
pub async fn read<F, Fut>(c: &impl GenericClient, table: &str, cols: &[String], mut sink: F) -> anyhow::Result<Tally>
where
    F: FnMut(Vec<Row>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let sql = format!("SELECT {} FROM {table}", super::sqlite::quoted(cols));
    let stream = c.query_raw(sql.as_str(), std::iter::empty::<&(dyn ToSql + Sync)>()).await?;
    futures_util::pin_mut!(stream);
    let mut tally = Tally::default();
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(r) = stream.try_next().await? {
        let mut row = Vec::with_capacity(cols.len());
        for (i, col) in r.columns().iter().enumerate() {
            row.push(value(&r, i, col.type_()).with_context(|| format!("{table}.{}", col.name()))?);
        }
        tally.add(&row);
        batch.push(row);
        if batch.len() == BATCH {
            sink(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).await?;
        }
    }
    if !batch.is_empty() {
        sink(batch).await?;
    }
    Ok(tally)
}

fn value(r: &tokio_postgres::Row, i: usize, ty: &Type) -> anyhow::Result<Value> {
    fn or_null<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
        v.map_or(Value::Null, f)
    }
    Ok(match *ty {
        Type::INT8 => or_null(r.try_get::<_, Option<i64>>(i)?, Value::Int),
        Type::INT4 => or_null(r.try_get::<_, Option<i32>>(i)?, |n| Value::Int(n.into())),
        Type::INT2 => or_null(r.try_get::<_, Option<i16>>(i)?, |n| Value::Int(n.into())),
        Type::BOOL => or_null(r.try_get::<_, Option<bool>>(i)?, |b| Value::Int(b.into())),
        Type::FLOAT8 => or_null(r.try_get::<_, Option<f64>>(i)?, Value::Real),
        Type::FLOAT4 => or_null(r.try_get::<_, Option<f32>>(i)?, |f| Value::Real(f.into())),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => or_null(r.try_get::<_, Option<String>>(i)?, Value::Text),
        Type::BYTEA => or_null(r.try_get::<_, Option<Vec<u8>>>(i)?, Value::Blob),
        ref other => anyhow::bail!("column type {other} is not one pith migrate knows"),
    })
}

/// Prepared multi-row INSERTs of one table, by row count.
pub struct Writer {
    table: String,
    cols: Vec<String>,
    prepared: HashMap<usize, tokio_postgres::Statement>,
}

impl Writer {
    pub fn new(table: &str, cols: &[String]) -> Writer {
        Writer { table: table.to_owned(), cols: cols.to_vec(), prepared: HashMap::new() }
    }

    pub async fn write(&mut self, c: &impl GenericClient, rows: &[Row]) -> anyhow::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let n = self.cols.len();
        if !self.prepared.contains_key(&rows.len()) {
            let values = (0..rows.len())
                .map(|r| format!("({})", (1..=n).map(|k| format!("${}", r * n + k)).collect::<Vec<_>>().join(", ")))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("INSERT INTO {} ({}) VALUES {values}", self.table, super::sqlite::quoted(&self.cols));
            self.prepared.insert(rows.len(), c.prepare(&sql).await?);
        }
        let stmt = &self.prepared[&rows.len()];
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::with_capacity(rows.len() * n);
        for row in rows {
            for (k, v) in row.iter().enumerate() {
                let ty = &stmt.params()[params.len()];
                params.push(param(v, ty).with_context(|| format!("{}.{}", self.table, self.cols[k]))?);
            }
        }
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect();
        c.execute(stmt, &refs).await.with_context(|| format!("cannot insert into {}", self.table))?;
        Ok(())
    }
}

fn param(v: &Value, ty: &Type) -> anyhow::Result<Box<dyn ToSql + Sync + Send>> {
    let bad = || anyhow::anyhow!("cannot store {v:?} in a {ty} column");
    Ok(match (ty.clone(), v) {
        (Type::INT8, Value::Null) => Box::new(None::<i64>),
        (Type::INT8, Value::Int(n)) => Box::new(*n),
        (Type::INT4, Value::Null) => Box::new(None::<i32>),
        (Type::INT4, Value::Int(n)) => Box::new(i32::try_from(*n).map_err(|_| bad())?),
        (Type::INT2, Value::Null) => Box::new(None::<i16>),
        (Type::INT2, Value::Int(n)) => Box::new(i16::try_from(*n).map_err(|_| bad())?),
        (Type::BOOL, Value::Null) => Box::new(None::<bool>),
        (Type::BOOL, Value::Int(n @ (0 | 1))) => Box::new(*n == 1),
        (Type::FLOAT8, Value::Null) => Box::new(None::<f64>),
        (Type::FLOAT8, Value::Real(f)) => Box::new(*f),
        (Type::TEXT | Type::VARCHAR, Value::Null) => Box::new(None::<String>),
        (Type::TEXT | Type::VARCHAR, Value::Text(s)) => Box::new(s.clone()),
        (Type::BYTEA, Value::Null) => Box::new(None::<Vec<u8>>),
        (Type::BYTEA, Value::Blob(b)) => Box::new(b.clone()),
        _ => return Err(bad()),
    })
}

/// Moves each identity column's sequence past the largest copied id, so
/// the next insert does not collide with a copied row. `tables` must
/// each have an `id` column.
pub async fn reset_sequences(c: &impl GenericClient, tables: &[&str]) -> anyhow::Result<()> {
    for table in tables {
        let seq: Option<String> = c.query_one("SELECT pg_get_serial_sequence($1, 'id')", &[table]).await?.get(0);
        if let Some(seq) = seq {
            c.execute(
                &format!("SELECT setval($1::text::regclass, COALESCE((SELECT max(id) FROM {table}), 0) + 1, false)"),
                &[&seq],
            )
            .await
            .with_context(|| format!("cannot reset the sequence of {table}"))?;
        }
    }
    Ok(())
}
