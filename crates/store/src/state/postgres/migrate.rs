//! The schema of a [`PgState`]: created where there is none and migrated to [`VERSION`] at
//! connect, in one transaction under an advisory lock (workers starting at once wait for each
//! other); a schema of a newer version is refused, untouched. A schema at [`VERSION`] already
//! costs one statement, not the transaction: through a far link each round trip counts, and a
//! worker connects to a Source's schema at each of its syncs.

use super::PgState;
use super::sql::{MIGRATIONS, VERSION};
use crate::error::{Error, Result};

impl PgState {
    /// Creates or migrates the schema (see the module docs).
    pub(super) fn migrate(&self) -> Result<()> {
        if self.current()? == Some(VERSION) {
            return Ok(());
        }
        let mut p = self.conn()?;
        let e = |e| self.err(e);
        let mut tx = p.get().client.transaction().map_err(e)?;
        // The schema's name is checked plain (`valid_schema`): written into the statements,
        // so that the lock, the creation and the version read are one round trip. The lock's
        // key is the one every version of this program takes.
        let mut v: i64 = 0;
        for m in tx
            .simple_query(&format!(
                "SELECT pg_advisory_xact_lock(hashtext('resourcesync schema {0}'));
                 CREATE SCHEMA IF NOT EXISTS \"{0}\";
                 CREATE TABLE IF NOT EXISTS \"{0}\".meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 SELECT value FROM \"{0}\".meta WHERE key = 'schema'",
                self.schema
            ))
            .map_err(e)?
        {
            if let postgres::SimpleQueryMessage::Row(row) = m
                && let Ok(Some(value)) = row.try_get("value")
            {
                v = value.parse().map_err(|_| {
                    self.corrupt(format!("schema version {value:?} is not a number"))
                })?;
            }
        }
        if v > VERSION {
            return Err(Error::NewerSchema {
                target: self.target.clone(),
                found: v,
                known: VERSION,
            });
        }
        if !(0..=VERSION).contains(&v) {
            return Err(self.corrupt(format!(
                "schema version {v}, this program knows 1 to {VERSION}"
            )));
        }
        // Every step and the new version, one round trip.
        let mut steps: String = MIGRATIONS
            .iter()
            .skip(usize::try_from(v).unwrap_or(0))
            .map(|step| format!("{step};\n"))
            .collect();
        steps.push_str(&format!(
            "INSERT INTO meta(key, value) VALUES('schema', '{VERSION}') \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ));
        tx.batch_execute(&steps).map_err(e)?;
        tx.commit().map_err(e)
    }

    /// The version of the schema, read in one statement; none where it has no version yet
    /// (no schema, no table `meta`, no row), or where reading it fails (the migration says
    /// why).
    pub(super) fn current(&self) -> Result<Option<i64>> {
        let mut p = self.conn()?;
        let read = p.get().client.simple_query(&format!(
            "SELECT value FROM \"{}\".meta WHERE key = 'schema'",
            self.schema
        ));
        Ok(read.ok().and_then(|msgs| {
            msgs.into_iter().find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => row
                    .try_get("value")
                    .ok()
                    .flatten()
                    .and_then(|v| v.parse().ok()),
                _ => None,
            })
        }))
    }
}

/// Against the server of `scripts/postgres.sh` (`RESOURCESYNC_TEST_POSTGRES`); without one
/// these tests fail.
#[cfg(test)]
mod tests {
    use super::super::plans::url;
    use super::*;
    use postgres::{Client, NoTls};

    /// The tables of `schema`, and its version.
    fn shape(c: &mut Client, schema: &str) -> (Vec<String>, Option<String>) {
        let tables = c
            .query(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = $1 ORDER BY 1",
                &[&schema],
            )
            .expect("tables")
            .iter()
            .map(|r| r.get(0))
            .collect();
        let v = c
            .query_opt(
                &format!("SELECT value FROM \"{schema}\".meta WHERE key = 'schema'"),
                &[],
            )
            .ok()
            .flatten()
            .map(|r| r.get(0));
        (tables, v)
    }

    /// A schema left at the version before the last is migrated by the next connect to the
    /// shape of one made new; one made new is left as it is.
    #[test]
    fn an_older_schema_is_migrated_to_the_shape_of_a_new_one() {
        let url = url();
        let id = std::process::id();
        let (new, old) = (format!("t_mig_new_{id}"), format!("t_mig_old_{id}"));
        let mut c = Client::connect(&url, NoTls).expect("client");
        c.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{new}\" CASCADE; DROP SCHEMA IF EXISTS \"{old}\" CASCADE"
        ))
        .expect("clean");
        drop(PgState::connect_schema(&url, &new).expect("new"));
        let made = shape(&mut c, &new);
        assert_eq!(made.1, Some(VERSION.to_string()));
        drop(PgState::connect_schema(&url, &new).expect("again"));
        assert_eq!(shape(&mut c, &new), made);

        // By hand: every step but the last, as an earlier version of this program left it.
        let before = VERSION - 1;
        let mut steps = format!(
            "CREATE SCHEMA \"{old}\"; SET search_path TO \"{old}\";
             CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES('schema', '{before}');"
        );
        for step in MIGRATIONS
            .iter()
            .take(usize::try_from(before).expect("steps"))
        {
            steps.push_str(step);
            steps.push_str(";\n");
        }
        c.batch_execute(&steps).expect("older schema");
        assert_ne!(shape(&mut c, &old).0, made.0);
        drop(PgState::connect_schema(&url, &old).expect("migrated"));
        assert_eq!(shape(&mut c, &old), made);
        c.batch_execute(&format!(
            "DROP SCHEMA \"{new}\" CASCADE; DROP SCHEMA \"{old}\" CASCADE"
        ))
        .expect("drop");
    }

    /// [`PgState::connect_existing`] makes nothing: no state for a schema not made, and the
    /// schema still not made; the state of one made.
    #[test]
    fn connecting_to_an_existing_schema_makes_none() {
        let url = url();
        let schema = format!("t_existing_{}", std::process::id());
        let mut c = Client::connect(&url, NoTls).expect("client");
        c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .expect("clean");
        assert!(
            PgState::connect_existing(&url, &schema)
                .expect("connect")
                .is_none()
        );
        let exists = |c: &mut Client| {
            c.query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
                .expect("namespace")
                .is_some()
        };
        assert!(!exists(&mut c), "the schema was made");
        drop(PgState::connect_schema(&url, &schema).expect("made"));
        assert!(
            PgState::connect_existing(&url, &schema)
                .expect("connect")
                .is_some()
        );
        c.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .expect("drop");
    }
}
