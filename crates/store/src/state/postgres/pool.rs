//! The connections of a [`PgState`]: a small pool, opened on demand, whose idle connections
//! go to the spares when the state is dropped; the statements prepared once per connection,
//! run outside a transaction ([`PgState::query`]) or in one ([`Tx`]).

use std::collections::HashMap;
use std::sync::MutexGuard;

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement, Transaction};

use super::spare::{give_spare, take_spare};
use super::{POOL_SIZE, PgState};
use crate::blocking::call;
use crate::error::Result;

/// The idle connections, and how many are open in all.
pub(super) struct Idle {
    pub(super) conns: Vec<Conn>,
    pub(super) open: usize,
}

/// A connection and the statements prepared on it.
pub(super) struct Conn {
    pub(super) client: Client,
    stmts: HashMap<&'static str, Statement>,
    /// The schema its search path names.
    schema: String,
}

/// A connection taken from the pool, given back when dropped (unless the server closed it).
pub(super) struct Pooled<'a> {
    state: &'a PgState,
    conn: Option<Conn>,
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let mut idle = self.state.idle();
        match self.conn.take() {
            Some(c) if !c.client.is_closed() => idle.conns.push(c),
            gone => {
                idle.open = idle.open.saturating_sub(1);
                // Closing a client is a call of its own runtime too.
                call(move || drop(gone));
            }
        }
        self.state.freed.notify_one();
    }
}

impl Drop for PgState {
    /// The idle connections are kept for the next state on the same URL, or closed where
    /// blocking is allowed (a state is often dropped at the end of an async function).
    fn drop(&mut self) {
        let conns =
            std::mem::take(&mut self.pool.get_mut().unwrap_or_else(|p| p.into_inner()).conns);
        give_spare(&self.url, conns);
    }
}

impl Pooled<'_> {
    pub(super) fn get(&mut self) -> &mut Conn {
        // Set from creation to drop.
        self.conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("a pooled connection is taken only when dropped"))
    }
}

/// A statement prepared once per connection, whether outside or inside a transaction.
fn prepared(
    stmts: &mut HashMap<&'static str, Statement>,
    sql: &'static str,
    prepare: impl FnOnce(&str) -> std::result::Result<Statement, postgres::Error>,
) -> std::result::Result<Statement, postgres::Error> {
    if let Some(s) = stmts.get(sql) {
        return Ok(s.clone());
    }
    let s = prepare(sql)?;
    stmts.insert(sql, s.clone());
    Ok(s)
}

impl PgState {
    fn idle(&self) -> MutexGuard<'_, Idle> {
        // Nothing in the pool is left half-changed by a panic.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection: an idle one, a new one while fewer than [`POOL_SIZE`] are open, or the
    /// next one given back.
    pub(super) fn conn(&self) -> Result<Pooled<'_>> {
        let mut idle = self.idle();
        loop {
            if let Some(c) = idle.conns.pop() {
                return Ok(Pooled {
                    state: self,
                    conn: Some(c),
                });
            }
            if idle.open < POOL_SIZE {
                idle.open += 1;
                drop(idle);
                let spare = take_spare(&self.url).and_then(|c| self.adopt(c));
                return match spare.map_or_else(|| self.open(), Ok) {
                    Ok(c) => Ok(Pooled {
                        state: self,
                        conn: Some(c),
                    }),
                    Err(e) => {
                        self.idle().open -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            idle = self.freed.wait(idle).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Opens a connection whose statements name the tables of the schema.
    pub(super) fn open(&self) -> Result<Conn> {
        let mut client = self.config.connect(NoTls).map_err(|e| self.err(e))?;
        client
            .batch_execute(&format!(
                "SET search_path TO \"{}\"; SET TIME ZONE 'UTC'",
                self.schema
            ))
            .map_err(|e| self.err(e))?;
        Ok(Conn {
            client,
            stmts: HashMap::new(),
            schema: self.schema.clone(),
        })
    }

    /// A spare connection made this state's (its search path set to the schema), or none if
    /// that fails (it is closed, and a new one opened instead).
    fn adopt(&self, mut c: Conn) -> Option<Conn> {
        if c.schema == self.schema {
            return Some(c);
        }
        match c
            .client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.schema))
        {
            Ok(()) => {
                c.schema = self.schema.clone();
                Some(c)
            }
            Err(_) => {
                call(move || drop(c));
                None
            }
        }
    }

    /// Runs a statement outside a transaction; its rows.
    pub(super) fn query(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let mut p = self.conn()?;
        let Conn { client, stmts, .. } = p.get();
        let st = prepared(stmts, sql, |q| client.prepare(q)).map_err(|e| self.err(e))?;
        client.query(&st, params).map_err(|e| self.err(e))
    }

    /// Runs `f` in a transaction, committed when it returns `Ok`, rolled back otherwise.
    pub(super) fn in_tx<T>(&self, f: impl FnOnce(&mut Tx<'_, '_>) -> Result<T>) -> Result<T> {
        let mut p = self.conn()?;
        let Conn { client, stmts, .. } = p.get();
        let tx = client.transaction().map_err(|e| self.err(e))?;
        let mut tx = Tx {
            state: self,
            tx,
            stmts,
        };
        let out = f(&mut tx)?;
        tx.tx.commit().map_err(|e| self.err(e))?;
        Ok(out)
    }
}

/// A transaction and the statements prepared on its connection.
pub(super) struct Tx<'s, 'c> {
    pub(super) state: &'s PgState,
    tx: Transaction<'c>,
    stmts: &'c mut HashMap<&'static str, Statement>,
}

impl Tx<'_, '_> {
    fn stmt(&mut self, sql: &'static str) -> Result<Statement> {
        let tx = &mut self.tx;
        prepared(self.stmts, sql, |q| tx.prepare(q)).map_err(|e| self.state.err(e))
    }

    pub(super) fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64> {
        let st = self.stmt(sql)?;
        self.tx.execute(&st, params).map_err(|e| self.state.err(e))
    }

    pub(super) fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let st = self.stmt(sql)?;
        self.tx.query(&st, params).map_err(|e| self.state.err(e))
    }
}
