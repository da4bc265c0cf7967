//! Extension elements (elements in other namespaces) kept as XML fragments, with the namespace
//! declarations they need to mean the same wherever they are written.

use std::io::Read;

use super::DocumentReader;
use super::tokens::{Attr, StartExtra, Tok, qname_of};
use crate::document::{RS_NS, SITEMAP_NS};
use crate::error::{Error, LimitKind};

impl<R: Read> DocumentReader<R> {
    /// The namespace a prefix will have in written documents: the Sitemap namespace by default,
    /// ResourceSync's for `rs`, and the root's other declarations.
    fn written_binding(&self, prefix: &str) -> Option<&str> {
        match prefix {
            "" => Some(SITEMAP_NS),
            "rs" => Some(RS_NS),
            "xml" => Some("http://www.w3.org/XML/1998/namespace"),
            p => self
                .header
                .namespaces
                .iter()
                .find(|(q, _)| q == p)
                .map(|(_, u)| u.as_str()),
        }
    }

    /// Serializes an extension element whose start was just read, with the end tag, and with
    /// declarations for the prefixes it uses whose binding written documents would not give
    /// them (declared below the root, or rebinding `rs` or the default namespace), so that it
    /// means the same wherever it is written.
    pub(super) fn capture(&mut self, start: Tok) -> Result<String, Error> {
        let Tok::Start {
            name,
            empty,
            attrs,
            extra,
            ..
        } = start
        else {
            return Ok(String::new());
        };
        let qname = qname_of(&name, &extra).to_owned();
        let StartExtra { raw, ns, decls, .. } = extra.map(|x| *x).unwrap_or_default();
        let raw = raw.unwrap_or_default();
        let own_decls: Vec<String> = decls.into_iter().map(|(p, _)| p).collect();
        let mut needed: Vec<(String, String)> = Vec::new();
        self.note_bindings(&qname, ns.as_deref(), &attrs, &own_decls, &mut needed);
        let mut body = String::new();
        let mut result = Ok(());
        if !empty {
            let was = std::mem::replace(&mut self.capturing, true);
            let target = self.depth - 1;
            let mut stack: Vec<String> = vec![qname.to_string()];
            result = loop {
                let tok = match self.next_tok() {
                    Ok(t) => t,
                    Err(e) => break Err(e),
                };
                match tok {
                    Tok::Start {
                        name,
                        empty,
                        attrs,
                        extra,
                        ..
                    } => {
                        let qname = qname_of(&name, &extra);
                        let x = extra.as_deref();
                        let ns = x.and_then(|x| x.ns.as_deref());
                        self.note_bindings(qname, ns, &attrs, &own_decls, &mut needed);
                        body.push_str(x.and_then(|x| x.raw.as_deref()).unwrap_or_default());
                        if empty {
                            body.push_str("/>");
                        } else {
                            body.push('>');
                            stack.push(qname.to_owned());
                        }
                    }
                    Tok::End { .. } => {
                        let q = stack.pop().unwrap_or_default();
                        body.push_str("</");
                        body.push_str(&q);
                        body.push('>');
                        if self.depth == target {
                            break Ok(());
                        }
                    }
                    Tok::Text { text, .. } => escape_text_into(&text, &mut body),
                    Tok::Other | Tok::Space | Tok::Decl { .. } => {}
                    Tok::Eof { pos } => {
                        break Err(self.err_malformed(pos, "unexpected end of document"));
                    }
                }
                if body.len() as u64 > self.opts.max_token_bytes {
                    break Err(Error::Limit {
                        doc: self.doc.clone(),
                        pos: self.here(),
                        limit: LimitKind::TokenBytes,
                        max: self.opts.max_token_bytes,
                    });
                }
            };
            self.capturing = was;
        }
        result?;
        // `<qname` + injected declarations + the raw attributes.
        let mut out = String::with_capacity(raw.len() + body.len() + 64);
        let head_len = 1 + qname.len();
        out.push_str(raw.get(..head_len).unwrap_or(&raw));
        for (p, u) in &needed {
            out.push_str(if p.is_empty() { " xmlns" } else { " xmlns:" });
            out.push_str(p);
            out.push_str("=\"");
            for c in u.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '"' => out.push_str("&quot;"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        out.push_str(raw.get(head_len..).unwrap_or(""));
        if empty {
            out.push_str("/>");
        } else {
            out.push('>');
            out.push_str(&body);
        }
        Ok(out)
    }

    /// Records the bindings an element of a captured fragment relies on that written documents
    /// would not provide.
    fn note_bindings(
        &self,
        qname: &str,
        ns: Option<&str>,
        attrs: &[Attr],
        own_decls: &[String],
        needed: &mut Vec<(String, String)>,
    ) {
        let prefix = qname.split_once(':').map(|(p, _)| p).unwrap_or("");
        let mut uses: Vec<(&str, &str)> = Vec::new();
        if let Some(u) = ns {
            uses.push((prefix, u));
        }
        for a in attrs {
            if let (Some(p), Some(u)) = (a.prefix.as_deref(), a.ns.as_deref()) {
                uses.push((p, u));
            }
        }
        for (p, u) in uses {
            if p == "xml" || p == "xmlns" {
                continue;
            }
            if self.written_binding(p) == Some(u)
                || own_decls.iter().any(|d| d == p)
                || needed.iter().any(|(q, _)| q == p)
            {
                continue;
            }
            needed.push((p.to_owned(), u.to_owned()));
        }
    }
}

/// Escapes character data for re-serialization.
pub(crate) fn escape_text_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
}
