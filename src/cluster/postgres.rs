//! The PostgreSQL transport: `LISTEN pith_bus` / `pg_notify('pith_bus', ...)`
//! on one dedicated connection, which this task drives itself so that it
//! sees `AsyncMessage::Notification`s.
//!
//! NOTIFY payloads are capped at 8000 bytes and a post may be 40,000
//! characters, so a message longer than `MAX_NOTIFY` is written to the
//! unlogged table `pith_bus_spill` and only its row id is notified; the
//! receivers read the row. NOTIFY is delivered after the sender's INSERT
//! committed, so the row is always there (rows older than ten minutes are
//! deleted by the senders). Every message is small except live events of
//! long posts, so the table is touched rarely.
//!
//! On any error the connection is dropped and made again with backoff;
//! after a reconnect the node drops its whole cache and tells the others
//! to do the same (see `super`).

use anyhow::Context;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::{Apply, Backoff, Envelope, Msg, Sink};

const CHANNEL: &str = "pith_bus";

/// The bus connection's `application_name` (see `pg_stat_activity`).
pub const APPLICATION_NAME: &str = "pith-bus";

/// Longest payload sent inline (PostgreSQL refuses 8000 bytes or more).
pub const MAX_NOTIFY: usize = 7_900;

/// Runs until the server drops its `Sink` (the queue closes).
pub async fn run(url: String, node: String, mut rx: mpsc::Receiver<Msg>, sink: std::sync::Arc<Sink>, apply: Apply) {
    let mut backoff = Backoff::new();
    let mut reconnect = false;
    loop {
        match session(&url, &node, &mut rx, &sink, &apply, reconnect, &mut backoff).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cluster bus (postgres): connection lost, reconnecting");
            }
        }
        reconnect = true;
        backoff.wait().await;
    }
}

async fn session(
    url: &str,
    node: &str,
    rx: &mut mpsc::Receiver<Msg>,
    sink: &Sink,
    apply: &Apply,
    reconnect: bool,
    backoff: &mut Backoff,
) -> anyhow::Result<()> {
    let mut config: tokio_postgres::Config = url.parse().context("bad database URL")?;
    // Named, so an operator can tell the bus session from the pool's.
    config.application_name(APPLICATION_NAME);
    let (client, mut conn) = config.connect(NoTls).await.context("cannot connect")?;
    let (ntx, mut nrx) = mpsc::unbounded_channel::<String>();
    // The connection must be polled for notifications to arrive; this task
    // ends (closing `nrx`) when the connection does.
    let driver = tokio::spawn(async move {
        while let Some(m) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    if ntx.send(n.payload().to_owned()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cluster bus (postgres): connection error");
                    return;
                }
            }
        }
    });
    // The connection driver is aborted when the session ends, whatever the path.
    let _stop = tokio_util::task::AbortOnDropHandle::new(driver);
    // Two nodes starting at once must not race to create the table.
    client
        .batch_execute(
            "SELECT pg_advisory_lock(7274084);
             CREATE UNLOGGED TABLE IF NOT EXISTS pith_bus_spill (
                 id BIGSERIAL PRIMARY KEY,
                 body TEXT NOT NULL,
                 created_at TIMESTAMPTZ NOT NULL DEFAULT now());
             SELECT pg_advisory_unlock(7274084);
             LISTEN pith_bus;",
        )
        .await
        .context("cannot LISTEN")?;
    backoff.reset();
    tracing::info!(node, "cluster bus (postgres): listening");
    // Anything cached before LISTEN took effect may be stale.
    apply(Msg::Flush);
    if reconnect {
        notify(&client, node, Msg::Flush).await?;
    }
    sink.set_connected(true);
    let _down = Disconnected(sink);
    loop {
        tokio::select! {
            out = rx.recv() => {
                let Some(msg) = out else { return Ok(()) };
                if sink.take_overflow() {
                    notify(&client, node, Msg::Flush).await?;
                }
                notify(&client, node, msg).await?;
            }
            inc = nrx.recv() => {
                let Some(text) = inc else { anyhow::bail!("the connection closed") };
                receive(&client, node, &text, apply).await?;
            }
        }
    }
}

/// Marks the sink disconnected when the session ends, whatever the path.
struct Disconnected<'a>(&'a Sink);

impl Drop for Disconnected<'_> {
    fn drop(&mut self) {
        self.0.set_connected(false);
    }
}

async fn notify(client: &Client, node: &str, msg: Msg) -> anyhow::Result<()> {
    let mut text = Envelope { node: node.to_owned(), msg }.encode();
    if text.len() > MAX_NOTIFY {
        let row = client
            .query_one("INSERT INTO pith_bus_spill (body) VALUES ($1) RETURNING id", &[&text])
            .await
            .context("cannot spill a large message")?;
        let id: i64 = row.get(0);
        if id % 64 == 0 {
            client.execute("DELETE FROM pith_bus_spill WHERE created_at < now() - interval '10 minutes'", &[]).await?;
        }
        text = Envelope { node: node.to_owned(), msg: Msg::Spilled { id } }.encode();
    }
    client.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &text]).await.context("cannot NOTIFY")?;
    Ok(())
}

async fn receive(client: &Client, node: &str, text: &str, apply: &Apply) -> anyhow::Result<()> {
    let Some(env) = Envelope::decode(text.as_bytes()) else {
        tracing::warn!(len = text.len(), "cluster bus (postgres): ignored a message it cannot read");
        return Ok(());
    };
    if env.node == node {
        return Ok(());
    }
    let msg = match env.msg {
        Msg::Spilled { id } => {
            let row = client.query_opt("SELECT body FROM pith_bus_spill WHERE id = $1", &[&id]).await?;
            match row.and_then(|r| Envelope::decode(r.get::<_, String>(0).as_bytes())) {
                Some(full) => full.msg,
                // Cleaned up already (a node that was stuck for minutes):
                // the event is lost; make sure nothing stale stays cached.
                None => Msg::Flush,
            }
        }
        msg => msg,
    };
    apply(msg);
    Ok(())
}
