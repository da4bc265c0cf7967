//! The Source's side of a run, drawn once from the seed: the initial resources and every change,
//! shared by both modes so that they simulate the very same history.

use crate::config::{ChangeDist, Config};

/// The kind of a change (the paper's `type ∈ {create, update, delete}`, §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// A new resource.
    Create,
    /// New content of an existing resource.
    Update,
    /// The resource is gone.
    Delete,
}

/// One resource state: which resource, which content (a token unique to this state), how big.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResState {
    /// The resource.
    pub id: u64,
    /// The content: unique per state, so two states are equal exactly when their tokens are.
    pub token: u64,
    /// Bytes.
    pub size: u64,
}

/// One change at the Source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangeEvent {
    /// Seconds since the start.
    pub t: f64,
    /// What happened.
    pub kind: ChangeKind,
    /// The new state (for a delete: the resource, token 0, size 0).
    pub state: ResState,
}

/// Initial resources and changes of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The resources at time 0, by id.
    pub initial: Vec<ResState>,
    /// The changes in time order, all within `(0, duration]`.
    pub changes: Vec<ChangeEvent>,
    /// One more than the largest id used.
    pub ids: u64,
}

/// The path of a resource relative to the Source's base URL. Zero-padded, so that the byte
/// order of URIs is the order of ids.
pub fn resource_path(id: u64) -> String {
    format!("r{id:07}.bin")
}

/// The id of a resource path (`r0000042.bin`), if it is one.
pub fn id_of_path(path: &str) -> Option<u64> {
    let digits = path.strip_prefix('r')?.strip_suffix(".bin")?;
    if digits.len() != 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The bytes of a resource state: pseudo-random from its token, so that distinct states differ.
pub fn content(state: &ResState) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(state.token ^ 0x5eed_0fc0_47e7);
    let mut v = Vec::with_capacity(state.size as usize);
    while (v.len() as u64) < state.size {
        v.extend_from_slice(&rng.u64(..).to_le_bytes());
    }
    v.truncate(state.size as usize);
    v
}

impl Workload {
    /// Draws the workload of `cfg` from its seed.
    pub fn generate(cfg: &Config) -> Self {
        let mut rng = fastrand::Rng::with_seed(cfg.seed);
        let mut token = 0u64;
        let mut next_token = || {
            token += 1;
            token
        };
        let initial: Vec<ResState> = (0..cfg.resources)
            .map(|id| ResState {
                id,
                token: next_token(),
                size: cfg.size.draw(&mut rng),
            })
            .collect();
        // The live ids, for picking one at random; `pos` finds an id's place for removal.
        let mut live: Vec<u64> = (0..cfg.resources).collect();
        let mut pos: Vec<usize> = (0..cfg.resources as usize).collect();
        let mut ids = cfg.resources;
        let mut changes = Vec::new();
        let mut t = 0.0f64;
        let m = cfg.mix;
        let total = m.create + m.update + m.delete;
        loop {
            t += match cfg.change_dist {
                ChangeDist::Fixed => cfg.change_interval,
                // Inverse transform of a uniform draw in (0, 1].
                ChangeDist::Exp => -cfg.change_interval * (1.0 - rng.f64()).ln(),
            };
            if t > cfg.duration {
                break;
            }
            let x = rng.f64() * total;
            let mut kind = if x < m.create {
                ChangeKind::Create
            } else if x < m.create + m.update {
                ChangeKind::Update
            } else {
                ChangeKind::Delete
            };
            if live.is_empty() {
                kind = ChangeKind::Create;
            }
            let state = match kind {
                ChangeKind::Create => {
                    let id = ids;
                    ids += 1;
                    pos.push(live.len());
                    live.push(id);
                    ResState {
                        id,
                        token: next_token(),
                        size: cfg.size.draw(&mut rng),
                    }
                }
                ChangeKind::Update => {
                    let id = live[rng.usize(..live.len())];
                    ResState {
                        id,
                        token: next_token(),
                        size: cfg.size.draw(&mut rng),
                    }
                }
                ChangeKind::Delete => {
                    let i = rng.usize(..live.len());
                    let id = live.swap_remove(i);
                    if let Some(&moved) = live.get(i) {
                        pos[moved as usize] = i;
                    }
                    ResState {
                        id,
                        token: 0,
                        size: 0,
                    }
                }
            };
            changes.push(ChangeEvent { t, kind, state });
        }
        Workload {
            initial,
            changes,
            ids,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ChangeMix;

    #[test]
    fn same_seed_same_workload_other_seed_other() {
        let cfg = Config {
            resources: 50,
            change_interval: 0.5,
            change_dist: ChangeDist::Exp,
            duration: 100.0,
            ..Config::default()
        };
        let a = Workload::generate(&cfg);
        assert_eq!(a, Workload::generate(&cfg));
        let b = Workload::generate(&Config { seed: 2, ..cfg });
        assert_ne!(a.changes, b.changes);
    }

    #[test]
    fn fixed_interval_and_mix() {
        let cfg = Config {
            resources: 10,
            change_interval: 2.0,
            duration: 10.0,
            mix: ChangeMix {
                create: 0.0,
                update: 1.0,
                delete: 0.0,
            },
            ..Config::default()
        };
        let w = Workload::generate(&cfg);
        let times: Vec<f64> = w.changes.iter().map(|c| c.t).collect();
        assert_eq!(times, [2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!(
            w.changes
                .iter()
                .all(|c| c.kind == ChangeKind::Update && c.state.id < 10)
        );
        // Tokens are unique across initial states and changes.
        let mut tokens: Vec<u64> = w.initial.iter().map(|s| s.token).collect();
        tokens.extend(w.changes.iter().map(|c| c.state.token));
        let n = tokens.len();
        tokens.sort_unstable();
        tokens.dedup();
        assert_eq!(tokens.len(), n);
    }

    #[test]
    fn deletes_never_repeat_and_empty_source_creates() {
        let cfg = Config {
            resources: 3,
            change_interval: 1.0,
            duration: 200.0,
            mix: ChangeMix {
                create: 0.0,
                update: 0.0,
                delete: 1.0,
            },
            ..Config::default()
        };
        let w = Workload::generate(&cfg);
        let mut live: std::collections::HashSet<u64> = (0..3).collect();
        for c in &w.changes {
            match c.kind {
                ChangeKind::Delete => assert!(live.remove(&c.state.id), "{c:?}"),
                ChangeKind::Create => assert!(live.insert(c.state.id)),
                ChangeKind::Update => assert!(live.contains(&c.state.id)),
            }
        }
    }

    #[test]
    fn paths_round_trip() {
        assert_eq!(resource_path(42), "r0000042.bin");
        assert_eq!(id_of_path("r0000042.bin"), Some(42));
        assert_eq!(id_of_path("r42.bin"), None);
        assert_eq!(id_of_path("resourcesync/x.xml"), None);
        let s = ResState {
            id: 1,
            token: 9,
            size: 13,
        };
        assert_eq!(content(&s).len(), 13);
        assert_ne!(content(&s), content(&ResState { token: 10, ..s }));
    }
}
