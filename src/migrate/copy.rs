//! The two directions of `pith migrate`. Each copies every table inside one
//! target transaction (a failure leaves the target as it was), then reads
//! the target back for the checksums.

use std::path::Path;

use anyhow::Context;

use super::rows::{PRESET, RECOUNT, Row, TABLES, Tally};
use super::{postgres, sqlite};
use crate::backup::ServeLock;

pub type Tallies = Vec<(&'static str, Tally)>;

/// What the SQLite reader thread hands the PostgreSQL writer.
enum Item {
    Table(&'static str, Vec<String>),
    Rows(Vec<Row>),
    Done(&'static str, Tally),
}

pub async fn sqlite_to_postgres(src: &Path, url: &str) -> anyhow::Result<(Tallies, Tallies)> {
    // Opened first: taking the lock would create a missing data directory.
    let db = sqlite::open_source(src)?;
    let _lock = ServeLock::acquire(src, "migrating it")?;
    // Connecting the store applies the PostgreSQL migrations.
    crate::store::postgres::PgStore::connect(url, &crate::store::postgres::PgOptions::default())
        .await
        .with_context(|| format!("cannot prepare {}", crate::settings::redact_url(url)))?;
    let mut client = postgres::connect(url).await?;
    for table in TABLES.iter().filter(|t| !PRESET.contains(t)) {
        let n = postgres::count(&client, table).await?;
        anyhow::ensure!(
            n == 0,
            "the target is not empty ({table} has {n} rows): pith migrate fills only an empty database"
        );
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Item>(4);
    let reader = std::thread::spawn(move || -> anyhow::Result<()> {
        let gone = || anyhow::anyhow!("the writer stopped");
        for table in TABLES {
            let cols = sqlite::columns(&db, table)?;
            tx.blocking_send(Item::Table(table, cols.clone())).map_err(|_| gone())?;
            let tally = sqlite::read(&db, table, &cols, |rows| tx.blocking_send(Item::Rows(rows)).map_err(|_| gone()))?;
            tx.blocking_send(Item::Done(table, tally)).map_err(|_| gone())?;
        }
        Ok(())
    });
    let txn = client.transaction().await?;
    let (mut source, mut with_id, mut all_cols) = (Vec::new(), Vec::new(), Vec::new());
    let mut writer = None;
    let written: anyhow::Result<()> = async {
        while let Some(item) = rx.recv().await {
            match item {
                Item::Table(table, cols) => {
                    postgres::check_columns(&txn, table, &cols).await?;
                    if PRESET.contains(&table) {
                        txn.execute(&format!("DELETE FROM {table}"), &[]).await?;
                    }
                    if cols.iter().any(|c| c == "id") {
                        with_id.push(table);
                    }
                    all_cols.push((table, cols.clone()));
                    writer = Some(postgres::Writer::new(table, &cols));
                }
                Item::Rows(rows) => {
                    if let Some(w) = writer.as_mut() {
                        w.write(&txn, &rows).await?;
                    }
                }
                Item::Done(table, tally) => source.push((table, tally)),
            }
        }
        Ok(())
    }
    .await;
    drop(rx);
    let read = reader.join().map_err(|_| anyhow::anyhow!("the SQLite reader panicked"))?;
    read.context("cannot read the source")?;
    written?;
    postgres::reset_sequences(&txn, &with_id).await?;
    txn.execute(RECOUNT, &[]).await.context("cannot count the copied topics")?;
    txn.commit().await.context("cannot commit the copy")?;
    let mut target = Vec::new();
    for (table, cols) in &all_cols {
        target.push((*table, postgres::read(&client, table, cols, |_| std::future::ready(Ok(()))).await?));
    }
    Ok((source, target))
}

pub async fn postgres_to_sqlite(url: &str, dst: &Path) -> anyhow::Result<(Tallies, Tallies)> {
    let mut client = postgres::connect(url).await?;
    // Creating the store applies the SQLite migrations (a new file is made).
    let store = crate::store::sqlite::SqliteStore::open(dst, &crate::store::sqlite::SqliteOptions::default())
        .with_context(|| format!("cannot create {}", dst.display()))?;
    crate::store::Store::shutdown(&store).await;
    drop(store);
    let _lock = ServeLock::acquire(dst, "migrating into it")?;
    let mut db = rusqlite::Connection::open(dst).with_context(|| format!("cannot open {}", dst.display()))?;
    for table in TABLES.iter().filter(|t| !PRESET.contains(t)) {
        let n = sqlite::count(&db, table)?;
        anyhow::ensure!(
            n == 0,
            "the target is not empty ({table} has {n} rows): pith migrate fills only an empty database"
        );
    }
    // One snapshot of the source for every table.
    let src = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let txn = db.transaction()?;
    let (mut source, mut all_cols) = (Vec::new(), Vec::new());
    for table in TABLES {
        let cols = sqlite::columns(&txn, table)?;
        postgres::check_columns(&src, table, &cols).await?;
        if PRESET.contains(table) {
            txn.execute(&format!("DELETE FROM {table}"), [])?;
        }
        // SQLite writes are quick and this is the only task: write inline.
        let tally =
            postgres::read(&src, table, &cols, |rows| std::future::ready(sqlite::write(&txn, table, &cols, &rows)))
                .await?;
        source.push((*table, tally));
        all_cols.push((*table, cols));
    }
    src.commit().await?;
    txn.execute(RECOUNT, []).context("cannot count the copied topics")?;
    // No trigger indexes an inserted post (migration 0017): the copied ones
    // are indexed here, in the same transaction.
    crate::store::sqlite::search_queue::index_unindexed_posts(&txn).context("cannot index the copied posts")?;
    // The stored unread counts (0018) are not a copied table.
    crate::store::sqlite::inbox::recount_all_unread(&txn).context("cannot count the unread notifications")?;
    txn.commit().context("cannot commit the copy")?;
    let check = sqlite::open_source(dst)?;
    let mut target = Vec::new();
    for (table, cols) in &all_cols {
        target.push((*table, sqlite::read(&check, table, cols, |_| Ok(()))?));
    }
    Ok((source, target))
}
