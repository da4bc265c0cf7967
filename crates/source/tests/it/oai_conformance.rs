//! The whole inventory conformance suite for the OAI-PMH inventory, against both real data
//! providers: the `oaipmh` library's (`RESOURCESYNC_TEST_OAI`, `scripts/oai-provider.sh`) and
//! Perl HTTP::OAI's (`RESOURCESYNC_TEST_OAI2`, `scripts/oai-http-oai.sh`, day granularity).
//!
//! The harness makes the suite's resources exist through the provider's admin API: the
//! resource the suite names `NAME` is the record `oai:conf-PID-N:NAME`, at that identifier's
//! path ([`record_path`]), its bytes the Dublin Core the provider serves for it (titled
//! `NAME` when made, titled with its bytes when put again); a removal marks the record deleted. A harvested record is always readable, so the
//! backend holds no broken resource, and the suite checks that none is reported.

use resourcesync_source::inventory::Inventory;
use resourcesync_source::inventory::conformance::{self, Harness};
use resourcesync_source::inventory::oai::{OaiInventory, OaiOptions, record_path};

/// One provider's repositories, a new one per inventory built.
struct Oai {
    /// The provider's root URL (`http://127.0.0.1:PORT/`).
    root: String,
    /// The `reset` command's settings (batch size, granularity).
    reset: &'static str,
    /// The repository of the inventory built last (`conf-PID-N`).
    name: String,
    n: u32,
    work: Option<tempfile::TempDir>,
}

impl Oai {
    fn new(var: &str, script: &str, reset: &'static str) -> Self {
        let root = std::env::var(var).unwrap_or_else(|_| {
            panic!(
                "{var} is not set: this test needs the OAI-PMH provider; run it through \
                 scripts/test.sh, or export {var}=$({script})"
            )
        });
        Oai {
            root,
            reset,
            name: String::new(),
            n: 0,
            work: None,
        }
    }

    fn id(&self, name: &str) -> String {
        format!("oai:{}:{name}", self.name)
    }

    fn admin(&self, json: &str) {
        resourcesync_http::install_tls_provider();
        let r = reqwest::blocking::Client::new()
            .post(format!("{}{}/admin", self.root, self.name))
            .body(json.to_owned())
            .send()
            .expect("provider admin");
        assert!(r.status().is_success(), "admin: {:?}", r.text());
    }

    /// The `put` command's record for the resource `name`, titled `title`.
    fn record(&self, name: &str, title: &str) -> String {
        format!(
            "{{\"id\": \"{}\", \"title\": \"{}\"}}",
            json_escape(&self.id(name)),
            json_escape(title)
        )
    }
}

fn json_escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '"' | '\\' => format!("\\{c}"),
            c if c.is_control() => format!("\\u{:04x}", u32::from(c)),
            c => c.to_string(),
        })
        .collect()
}

impl Harness for Oai {
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory> {
        assert!(broken.is_none(), "asked for a broken record");
        self.n += 1;
        self.name = format!("conf-{}-{}", std::process::id(), self.n);
        let records: Vec<String> = files.iter().map(|(n, _)| self.record(n, n)).collect();
        self.admin(&format!(
            "{{\"reset\": {{{}}}, \"put\": [{}]}}",
            self.reset,
            records.join(", ")
        ));
        let work = tempfile::tempdir().expect("work");
        let url = format!("{}{}/oai", self.root, self.name);
        let inv = OaiInventory::open(&url, OaiOptions::default(), work.path()).expect("open");
        self.work = Some(work);
        Box::new(inv)
    }

    fn put(&mut self, name: &str, bytes: &[u8]) {
        let title = String::from_utf8_lossy(bytes);
        self.admin(&format!("{{\"put\": [{}]}}", self.record(name, &title)));
    }

    fn remove(&mut self, name: &str) {
        self.admin(&format!(
            "{{\"delete\": [\"{}\"]}}",
            json_escape(&self.id(name))
        ));
    }

    fn path_of(&self, name: &str) -> String {
        let p = record_path(&self.id(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        p.to_string_lossy().into_owned()
    }

    fn keeps_bytes(&self) -> bool {
        false
    }

    fn can_break(&self) -> bool {
        false
    }
}

#[test]
fn the_oaipmh_provider_s_inventory_passes_the_conformance_suite() {
    let mut h = Oai::new(
        "RESOURCESYNC_TEST_OAI",
        "scripts/oai-provider.sh",
        "\"batch_size\": 25",
    );
    conformance::run(&mut h).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_http_oai_provider_s_inventory_passes_the_conformance_suite() {
    let mut h = Oai::new(
        "RESOURCESYNC_TEST_OAI2",
        "scripts/oai-http-oai.sh",
        "\"batch_size\": 25, \"granularity\": \"YYYY-MM-DD\"",
    );
    conformance::run(&mut h).unwrap_or_else(|e| panic!("{e}"));
}
