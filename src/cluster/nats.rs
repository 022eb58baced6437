//! The NATS transport: every node publishes to and subscribes to one
//! subject. The client reconnects by itself; after it does, the node
//! drops its whole cache and tells the others to (see `super`). NATS
//! carries messages up to its `max_payload` (1 MiB by default), more than
//! the largest post, so nothing spills.

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{Apply, Envelope, Msg, Sink};

pub const SUBJECT: &str = "pith.bus";

/// Runs until the server drops its `Sink` (the queue closes).
pub async fn run(url: String, node: String, mut rx: mpsc::Receiver<Msg>, sink: std::sync::Arc<Sink>, apply: Apply) {
    let (etx, mut events) = mpsc::unbounded_channel::<async_nats::Event>();
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .max_reconnects(None)
        .event_callback(move |ev| {
            let etx = etx.clone();
            async move {
                let _ = etx.send(ev);
            }
        })
        .connect(url.as_str())
        .await;
    let client = match client {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cluster bus (nats): cannot connect; this node runs without a bus");
            return;
        }
    };
    let mut sub = match client.subscribe(SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cluster bus (nats): cannot subscribe; this node runs without a bus");
            return;
        }
    };
    // Make sure the subscription is registered with the server before the
    // node counts as listening; then drop what was cached before.
    if let Err(e) = client.flush().await {
        tracing::warn!(error = %e, "cluster bus (nats): not connected yet");
    } else {
        sink.set_connected(true);
    }
    apply(Msg::Flush);
    tracing::info!(node, "cluster bus (nats): subscribed");
    let publish = |msg: Msg| {
        let text = Envelope { node: node.clone(), msg }.encode();
        let client = client.clone();
        async move {
            if let Err(e) = client.publish(SUBJECT, text.into()).await {
                tracing::warn!(error = %e, "cluster bus (nats): cannot publish");
            }
        }
    };
    let mut was_down = false;
    loop {
        tokio::select! {
            out = rx.recv() => {
                let Some(msg) = out else { return };
                if sink.take_overflow() {
                    publish(Msg::Flush).await;
                }
                publish(msg).await;
            }
            inc = sub.next() => {
                let Some(m) = inc else {
                    tracing::error!("cluster bus (nats): subscription ended; this node runs without a bus");
                    return;
                };
                match Envelope::decode(&m.payload) {
                    Some(env) if env.node == node => {}
                    Some(env) => apply(env.msg),
                    None => tracing::warn!("cluster bus (nats): ignored a message it cannot read"),
                }
            }
            ev = events.recv() => match ev {
                Some(async_nats::Event::Disconnected) => {
                    was_down = true;
                    sink.set_connected(false);
                    tracing::warn!("cluster bus (nats): disconnected, reconnecting");
                }
                Some(async_nats::Event::Connected) if was_down => {
                    was_down = false;
                    tracing::info!("cluster bus (nats): reconnected; dropping the cache");
                    apply(Msg::Flush);
                    publish(Msg::Flush).await;
                    sink.set_connected(true);
                }
                Some(async_nats::Event::Connected) => sink.set_connected(true),
                _ => {}
            },
        }
    }
}
