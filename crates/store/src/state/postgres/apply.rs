//! The writes of a batch in PostgreSQL one at a time ([`Tx::apply_op`]), in its transaction:
//! what a batch in bulk (`bulk.rs`) runs for the writes it does not group.

use std::collections::HashMap;

use resourcesync_model::HashAlg;

use super::pool::Tx;
use super::sql::{COMPLETE, FENCE, PUT_PENDING, PUT_RESOURCE, SET_CURSOR};
use super::token;
use crate::error::{Error, Result};
use crate::state::sqlite::{encode_dups, to_i64};
use crate::state::{KnownDocument, Op};

impl Tx<'_, '_> {
    /// One write of a batch.
    pub(super) fn apply_op(&mut self, op: &Op<'_>) -> Result<()> {
        match *op {
            Op::PutResource(r) => {
                self.execute(
                    PUT_RESOURCE,
                    &[
                        &r.uri,
                        &r.source,
                        &r.path,
                        &to_i64(r.length),
                        &r.hashes.value_of(&HashAlg::Md5),
                        &r.hashes.value_of(&HashAlg::Sha1),
                        &r.hashes.value_of(&HashAlg::Sha256),
                        &r.lastmod.map(|d| d.to_string()),
                        &r.etag,
                        &r.last_modified,
                        &r.gone,
                    ],
                )?;
            }
            Op::RemoveResource(uri) => {
                self.execute("DELETE FROM resources WHERE uri = $1", &[&uri])?;
            }
            Op::SetGone(uri, gone) => {
                self.execute(
                    "UPDATE resources SET gone = $2 WHERE uri = $1",
                    &[&uri, &gone],
                )?;
            }
            Op::PutPending(p) => {
                self.execute(
                    PUT_PENDING,
                    &[
                        &p.source,
                        &p.uri,
                        &p.change.as_ref().map(|c| c.as_str().to_owned()),
                        &to_i64(p.length),
                        &(!p.hashes.is_empty()).then(|| p.hashes.to_string()),
                        &p.lastmod.map(|d| d.to_string()),
                        &encode_dups(&p.duplicates),
                        &p.error,
                    ],
                )?;
            }
            Op::RemovePending(source, uri) => {
                self.execute(
                    "DELETE FROM pending WHERE source = $1 AND uri = $2",
                    &[&source, &uri],
                )?;
            }
            Op::SetCursor(c) => {
                self.execute(
                    SET_CURSOR,
                    &[
                        &c.source,
                        &c.cursor.map(|d| d.to_string()),
                        &c.synced_at.map(|d| d.to_string()),
                        &c.checked_at.map(|d| d.to_string()),
                    ],
                )?;
            }
            Op::SetDocuments(start, docs) => {
                self.execute("DELETE FROM documents WHERE start = $1", &[&start])?;
                // One statement for all (a round trip each is what a far server makes
                // slow); a role and URL given twice keeps the last, as one upsert each did.
                let mut last: HashMap<(&str, &str), &KnownDocument> = HashMap::new();
                for d in docs.iter() {
                    last.insert((d.role.as_str(), d.url.as_str()), d);
                }
                if !last.is_empty() {
                    let docs: Vec<&KnownDocument> = last.into_values().collect();
                    let roles: Vec<&str> = docs.iter().map(|d| d.role.as_str()).collect();
                    let urls: Vec<&str> = docs.iter().map(|d| d.url.as_str()).collect();
                    let etags: Vec<Option<&str>> = docs.iter().map(|d| d.etag.as_deref()).collect();
                    let lms: Vec<Option<&str>> =
                        docs.iter().map(|d| d.last_modified.as_deref()).collect();
                    self.execute(
                        "INSERT INTO documents(start, role, url, etag, last_modified) \
                         SELECT $1, r, u, e, l FROM unnest($2::text[], $3::text[], $4::text[], \
                         $5::text[]) AS t(r, u, e, l)",
                        &[&start, &roles, &urls, &etags, &lms],
                    )?;
                }
            }
            Op::PutVersion(v) => self.put_version(v)?,
            Op::EndVersion(e) => self.end_version(e)?,
            Op::RemoveVersion(source, uri, seq) => self.remove_version(source, uri, seq)?,
            Op::Fence(l) => {
                if self
                    .query(FENCE, &[&l.name, &l.holder, &token(l.token)])?
                    .is_empty()
                {
                    return Err(Error::LeaseLost {
                        name: l.name.clone(),
                        holder: l.holder.clone(),
                    });
                }
            }
            Op::CompleteWork(cl) => {
                if self.execute(COMPLETE, &[&cl.item.key, &cl.holder, &token(cl.token)])? == 0 {
                    return Err(Error::LeaseLost {
                        name: cl.item.key.clone(),
                        holder: cl.holder.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}
