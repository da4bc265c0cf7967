//! Push mode: the follower's notifications applied as they arrive, and the counting proxy in
//! front of its callback (see the module above).

use super::wire::RequestParser;
use super::*;

/// The push strategy: the Destination's push follower ([`watch_push`], as `sync --watch
/// --push` runs it) subscribed at the Source's embedded hub, the hub delivering through a second
/// counting proxy in front of the follower's callback.
///
/// Each round the follower reports (a payload applied, or a catch-up sync) is one iteration: it
/// transferred the deliveries received since the last round (one request and the payload's
/// body bytes each; HTTP headers left out, as for every response) and what the Destination
/// fetched through the Source's proxy meanwhile; its `sync_seconds` start when the oldest of
/// those deliveries reached the callback: the follower's own work on a payload is what model
/// mode takes as `sync_overhead` for push. The publish delay measured is a publish batch's time,
/// from its start to the delivery of its notification (scan, Change List, the hub's queue and
/// its POST): model mode publishes push changes in batches of that length, a change made
/// while one runs waiting for the next, as the publisher here does.
pub(super) async fn drive_push(d: Drive<'_>, sopts: SyncOptions) -> Result<()> {
    let Drive {
        cfg,
        w,
        running,
        shared,
        src,
        dst,
        tmp,
    } = d;
    if running.hub().is_none() {
        return Err(Error::Run("the Source runs without its hub".into()));
    }
    // The follower binds its callback server on a port of its choosing and tells it through its
    // stats; the delivery proxy forwards there (no delivery can come before the follower has
    // subscribed, so before it has bound).
    let push_stats = Arc::new(PushStats::default());
    let front = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::io("binding the delivery proxy", e))?;
    let front_addr = front
        .local_addr()
        .map_err(|e| Error::io("delivery proxy address", e))?;
    let deliveries = tokio::spawn(delivery_proxy(front, push_stats.clone(), shared.clone()));
    let popts = PushOptions {
        callback_listen: "127.0.0.1:0".into(),
        callback_url: Some(format!("http://{front_addr}/")),
        // No catch-up polls in the measured interval: every change comes by notification.
        poll_interval: Duration::from_secs(3600),
        ..PushOptions::default()
    };
    let stop = StopHandle::new();
    // Told once the follower is subscribed and caught up (its second round), then after
    // every round.
    let ready = Arc::new(tokio::sync::Notify::new());
    let progress = Arc::new(tokio::sync::Notify::new());
    // The first error reading the copies, reported at the end.
    let failed: Arc<Mutex<Option<Error>>> = Arc::default();
    let on_round = round_observer(
        shared.clone(),
        dst.to_path_buf(),
        ready.clone(),
        progress.clone(),
        failed.clone(),
    );
    let mut follower = {
        let (stop, sopts) = (stop.clone(), sopts.clone());
        tokio::spawn(async move {
            watch_push(
                &sopts,
                &WatchOptions::default(),
                &popts,
                Arc::new(Quiet),
                &stop,
                Some(push_stats),
                on_round,
            )
            .await
        })
    };
    // Subscribed and caught up, or the follower ended (an error).
    tokio::select! {
        () = ready.notified() => {}
        r = &mut follower => {
            deliveries.abort();
            return Err(stopped_early(r));
        }
    }
    if let Err(e) = first_sync_complete(shared, dst) {
        stop.stop();
        return Err(e);
    }
    let clock = WallClock::start();
    start_measuring(shared, clock);
    let (changes, publishing) = spawn_source(w, running, shared, src, tmp, clock, true);
    let outcome: Result<()> = async {
        // Every change made, then applied (or a bound: what is still out of sync is counted
        // apart as unsynced, as the polling strategies count it after their last drain).
        tokio::time::sleep_until(clock.instant_of(cfg.duration).into()).await;
        let bound = tokio::time::Instant::now()
            + Duration::from_secs_f64((cfg.sync_interval * f64::from(DRAIN_SYNCS)).max(5.0));
        while !changes.is_finished() || lock(&shared.tracker).unsynced() > 0 {
            if follower.is_finished() {
                break;
            }
            if tokio::time::timeout_at(bound, progress.notified())
                .await
                .is_err()
            {
                break;
            }
        }
        Ok(())
    }
    .await;
    stop.stop();
    let followed = follower.await;
    deliveries.abort();
    let r = finish(shared, changes, publishing, outcome).await;
    if let Some(e) = lock(&failed).take() {
        return Err(e);
    }
    match followed {
        Ok(Ok(_)) => r,
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(Error::Run(format!("the push follower failed: {e}"))),
    }
}

/// What the follower reports each round, as an iteration: the deliveries and fetches since the
/// last round, from the oldest delivery's publication until the copies are in place; told on
/// `ready` once it is subscribed and caught up (its second round, before the measure starts),
/// on `progress` after every measured round. The first error reading the copies goes in
/// `failed`.
fn round_observer(
    shared: Arc<Shared>,
    dst: std::path::PathBuf,
    ready: Arc<tokio::sync::Notify>,
    progress: Arc<tokio::sync::Notify>,
    failed: Arc<Mutex<Option<Error>>>,
) -> impl FnMut(&Round) + Send + 'static {
    let mut rounds = 0u64;
    move |_: &Round| {
        rounds += 1;
        let Some(clock) = *lock(&shared.clock) else {
            if rounds == 2 {
                ready.notify_one();
            }
            return;
        };
        if let Err(e) = record_round(&shared, &dst, clock.now()) {
            lock(&failed).get_or_insert(e);
        }
        progress.notify_one();
    }
}

/// One measured round at `t`: the transfer and the copies' times in sync, the iteration and
/// the time busy.
fn record_round(shared: &Shared, dst: &Path, t: f64) -> Result<()> {
    let (mut transfer, arrived) = {
        let mut m = lock(&shared.meter);
        // Each resource is required once per iteration.
        m.fetched.clear();
        (
            std::mem::take(&mut m.transfer),
            std::mem::take(&mut m.arrived),
        )
    };
    let p = std::mem::take(&mut *lock(&shared.push));
    transfer.requests += p.deliveries;
    transfer.total += p.bytes;
    let started = p.published.unwrap_or(t).min(t);
    let observed = observe(shared, dst, t, &arrived);
    // Busy until the copies are in place (the last body's arrival, as the copy's time
    // in sync is taken; a removal at the round's end), as model mode counts it.
    let end = arrived
        .values()
        .copied()
        .fold(None, |m: Option<f64>, a| Some(m.map_or(a, |m| m.max(a))));
    let mut tr = lock(&shared.tracker);
    tr.iteration(started, transfer);
    tr.busy(started, end.unwrap_or(t).max(started) - started);
    observed
}

/// The error of a follower that ended before it was subscribed.
fn stopped_early<T>(
    r: std::result::Result<
        std::result::Result<T, resourcesync_destination::Error>,
        tokio::task::JoinError,
    >,
) -> Error {
    match r {
        Ok(Ok(_)) => Error::Run("the push follower stopped before it was subscribed".into()),
        Ok(Err(e)) => e.into(),
        Err(e) => Error::Run(format!("the push follower failed: {e}")),
    }
}

/// Every resource copied by the follower's first sync (before the measure starts).
fn first_sync_complete(shared: &Shared, dst: &Path) -> Result<()> {
    observe(shared, dst, 0.0, &HashMap::new())?;
    let tr = lock(&shared.tracker);
    if (0..tr.ids()).any(|id| !tr.in_sync(id)) {
        return Err(Error::Run(
            "the push follower's first sync did not copy every resource".into(),
        ));
    }
    Ok(())
}

/// The measure starts: the meter counts from now, the clock is set.
fn start_measuring(shared: &Shared, clock: WallClock) {
    {
        let mut m = lock(&shared.meter);
        *m = Meter {
            active: true,
            ..Meter::default()
        };
    }
    *lock(&shared.clock) = Some(clock);
}

/// The proxy in front of the push follower's callback: counts each POST (a content
/// distribution request of the hub, WebSub §7) and its body bytes, for the next round.
async fn delivery_proxy(listener: TcpListener, upstream: Arc<PushStats>, shared: Arc<Shared>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = shared.clone();
        let Some(&upstream) = upstream.callback_addr.get() else {
            // Not subscribed yet, so not a delivery of the hub's: refused.
            continue;
        };
        conns.spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let up = async move {
                let mut parser = RequestParser::keeping_bodies();
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    for (method, _, length, body) in parser.feed_with_bodies(&buf[..n]) {
                        if method == "POST" {
                            shared.delivered(length, &body);
                        }
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = sw.shutdown().await;
            };
            let down = async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
                let _ = cw.shutdown().await;
            };
            tokio::join!(up, down);
        });
        while conns.try_join_next().is_some() {}
    }
}
