//! The channel a push follower subscribes with: the topic and hub, checked against the reach
//! of the Source's requests ([`crate::http::HttpOptions::reach`]), and the client that sends
//! the subscription.

use std::sync::Arc;
use std::time::Duration;

use resourcesync_websub::subscriber;

use crate::error::{Error, Result};
use crate::options::SyncOptions;
use crate::report::NotificationChannel;
use crate::report::Observer;

/// The client of the subscription: the WebSub one; with a reach (the aggregator's
/// `allow_hosts`), one resolving through the reach's resolver, without a proxy (which would
/// resolve past it).
pub(super) fn push_client(o: &SyncOptions) -> Result<reqwest::Client> {
    let Some(reach) = &o.http.reach else {
        return resourcesync_websub::hub::http_client(Duration::from_secs(10))
            .map_err(|e| Error::Config(e.to_string()));
    };
    resourcesync_http::build(|| {
        Ok(resourcesync_http::client_builder(
            crate::http::USER_AGENT,
            0,
            &crate::http::Proxy::None,
        )?
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(10))
        .dns_resolver(Arc::new(reach.resolver())))
    })
    .map_err(|e| Error::Config(e.to_string()))
}

/// The channel to subscribe with (the topic's own Link headers first, [`topic_and_hub`]), or
/// `None` with a warning when the reach of the requests ([`crate::http::HttpOptions::reach`])
/// does not allow its topic or its hub: a Source does not get a subscription request sent
/// where its other requests may not go.
pub(super) async fn channel_within_reach(
    o: &SyncOptions,
    client: &reqwest::Client,
    c: NotificationChannel,
    obs: &dyn Observer,
) -> Option<NotificationChannel> {
    let refusal = |c: &NotificationChannel| -> Option<String> {
        let reach = o.http.reach.as_ref()?;
        [("topic", &c.topic), ("hub", &c.hub)]
            .into_iter()
            .find_map(|(what, u)| {
                let why = match reqwest::Url::parse(u) {
                    Ok(p) => reach.check(&p).err()?,
                    Err(e) => format!("not a URL: {e}"),
                };
                Some(format!("the {what} {u}: {why}"))
            })
    };
    let warn = |why: String| {
        obs.warning(&format!(
            "not subscribing: {why}; polling the Change Lists instead"
        ));
    };
    if let Some(why) = refusal(&c) {
        warn(why);
        return None;
    }
    let (topic, hub) = topic_and_hub(client, c.topic, c.hub).await;
    let c = NotificationChannel { topic, hub };
    if let Some(why) = refusal(&c) {
        warn(why);
        return None;
    }
    Some(c)
}

/// WebSub §4: the topic's own Link headers name the topic and its hub, when it has them;
/// otherwise those the Capability List advertises.
async fn topic_and_hub(client: &reqwest::Client, topic: String, hub: String) -> (String, String) {
    match subscriber::discover(client, &topic).await {
        Ok(d) => (
            d.topic.unwrap_or(topic),
            d.hubs.into_iter().next().unwrap_or(hub),
        ),
        Err(e) => {
            tracing::info!("discovery at the topic: {e}; using the Capability List's hub");
            (topic, hub)
        }
    }
}
