//! The page of an aggregator of 1,800 Sources (the size of EHRI's): summary counts first,
//! failing Sources first, a filter by name and state, pages of 100, no self-reload unless
//! asked. The big page is rendered from the status model (1,800 Sources registered, a third
//! failing with a realistic error, some syncing); the parameters are also tested over HTTP on
//! a running service with a Source that follows and one that fails.

use crate::service::start_local;
use std::collections::HashMap;
use std::time::Duration;

use resourcesync_aggregate::listing::{ListQuery, StateFilter, list};
use resourcesync_aggregate::status::{Phase, Status};
use resourcesync_aggregate::web::index_page;
use resourcesync_testkit::Server;

use crate::service::{config, hand_written, until};

const N: usize = 1800;

fn ehri_sized() -> Status {
    let mut text = String::new();
    for i in 0..N {
        text.push_str(&format!(
            "[[source]]\nname = \"src-{i:04}\"\nurl = \"https://archive-{i}.example.org/.well-known/resourcesync\"\nschedule = \"1h\"\n\n"
        ));
    }
    let cfg = config(&text);
    let status = Status::default();
    for (i, spec) in cfg.sources.iter().enumerate() {
        status.register(spec);
        if i % 3 == 0 {
            status.started(&spec.name);
            status.failed(
                &spec.name,
                &format!(
                    "GET https://archive-{i}.example.org/.well-known/resourcesync: error sending \
                     request: client error (Connect): tcp connect error: Connection refused \
                     (os error 111)"
                ),
            );
        } else if i % 10 == 1 {
            status.started(&spec.name);
        }
    }
    status
}

fn query(pairs: &[(&str, &str)]) -> Result<ListQuery, String> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    ListQuery::parse(&m)
}

fn rows(page: &str) -> usize {
    page.matches("<tr><td><a href=\"sources/").count()
}

#[test]
fn the_page_of_1800_sources_is_a_summary_and_a_page_failing_first() {
    let status = ehri_sized();
    let page = index_page(status.snapshot(), &query(&[]).expect("no parameters"));
    // The whole list in one table was 618 KB at EHRI's size; a page of 100 is bounded.
    let all = {
        let mut q = query(&[("per_page", "500")]).expect("per_page");
        (1..=4)
            .map(|p| {
                q.page = p;
                index_page(status.snapshot(), &q).len()
            })
            .sum::<usize>()
    };
    println!(
        "the page of {N} Sources: {} bytes (every row, in pages of 500: {all} bytes)",
        page.len()
    );
    assert!(page.len() < 100_000, "{} bytes", page.len());
    assert_eq!(rows(&page), 100);
    // Summary first, then the rows, failing ones first.
    let summary = page.find("1800 Sources, 600 failing").expect("summary");
    let table = page.find("<thead>").expect("table");
    assert!(summary < table);
    // Syncing: i % 10 == 1 and not failing (i % 3 != 0): 180 - 60.
    for count in [">0 ok</td>", ">120 syncing</td>", ">1200 baselining</td>"] {
        assert!(page[..table].contains(count), "{count}: {}", &page[..table]);
    }
    let first_row = &page[table..];
    let first_row = &first_row[..first_row.find("</tr><tr>").expect("rows")];
    assert!(first_row.contains("failing since"), "{first_row}");
    // Pages: links to the next, none to the previous; no self-reload unless asked.
    assert!(page.contains("Sources 1–100 of 1800 (page 1 of 18)"));
    assert!(page.contains("<a rel=\"next\" href=\"?page=2\">"));
    assert!(!page.contains("rel=\"prev\""));
    assert!(!page.contains("http-equiv=\"refresh\""));

    // The last page: the previous link, no next; the failing ones came first, so not here.
    let last = index_page(status.snapshot(), &query(&[("page", "18")]).expect("page"));
    assert_eq!(rows(&last), 100);
    assert!(last.contains("<a rel=\"prev\" href=\"?page=17\">"));
    assert!(!last.contains("rel=\"next\""));
    assert!(!last.contains("class=\"failing\">failing since"));

    // Filter by name and by state: src-17xx failing are 1701, 1704, … 1797 (i % 3 == 0).
    let q = query(&[("q", "SRC-17"), ("state", "failing")]).expect("filter");
    let l = list(status.snapshot(), &q);
    assert_eq!((l.matching, l.pages, l.summary.sources), (33, 1, N));
    assert!(
        l.sources
            .iter()
            .all(|v| v.phase == Phase::Failing && v.name.starts_with("src-17"))
    );
    let filtered = index_page(status.snapshot(), &q);
    assert_eq!(rows(&filtered), 33);
    // The form keeps the filter (a GET form: no JavaScript).
    assert!(filtered.contains("<form method=\"get\""));
    assert!(filtered.contains("name=\"q\" value=\"SRC-17\""));
    assert!(filtered.contains("<option selected>failing</option>"));
    let syncing = list(
        status.snapshot(),
        &query(&[("state", "syncing")]).expect("q"),
    );
    assert_eq!(syncing.matching, 120);
    assert_eq!(StateFilter::Syncing.name(), "syncing");

    // Opt-in reload, kept by the links.
    let r = index_page(
        status.snapshot(),
        &query(&[("refresh", "30")]).expect("refresh"),
    );
    assert!(r.contains("<meta http-equiv=\"refresh\" content=\"30\">"));
    assert!(r.contains("href=\"?page=2&amp;refresh=30\""));

    // Wrong parameters: refused, naming the parameter and what it takes.
    for (k, v) in [
        ("page", "0"),
        ("page", "x"),
        ("per_page", "100000"),
        ("state", "bogus"),
        ("refresh", "1"),
    ] {
        let e = query(&[(k, v)]).expect_err(k);
        assert!(e.contains(&format!("`{k}=")), "{e}");
    }
    // A page past the last shows the last.
    let far = list(status.snapshot(), &query(&[("page", "999")]).expect("page"));
    assert_eq!((far.page, far.sources.len()), (18, 100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_parameters_over_http() {
    let good = hand_written().await;
    let broken = Server::empty().await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"museum\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1h\"\n\n\
         [[source]]\nname = \"archive\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1h\"\n",
        good.base, broken.base
    );
    let agg = start_local(&text, store.path());
    let limit = Duration::from_secs(60);
    until(&agg, "museum", limit, |v| v.phase == Phase::Following).await;
    until(&agg, "archive", limit, |v| v.phase == Phase::Failing).await;
    let web = resourcesync_testkit::serve(resourcesync_aggregate::web::router(agg.clone())).await;
    let get = |path: &str| {
        let url = format!("http://{web}{path}");
        async move {
            let r = reqwest::get(url).await.expect("GET");
            (r.status().as_u16(), r.text().await.expect("body"))
        }
    };
    let (s, page) = get("/").await;
    assert_eq!(s, 200);
    // Failing first, though "archive" < "museum" either way: check with a name filter too.
    let (a, m) = (
        page.find("sources/archive").expect("a"),
        page.find("sources/museum").expect("m"),
    );
    assert!(a < m);
    let (_, failing) = get("/?state=failing").await;
    assert!(failing.contains("sources/archive") && !failing.contains("sources/museum"));
    let (_, named) = get("/?q=mus&state=all").await;
    assert!(named.contains("sources/museum") && !named.contains("sources/archive"));
    let (s, bad) = get("/?page=abc").await;
    assert_eq!(s, 400);
    assert!(bad.contains("`page=abc`"), "{bad}");

    // The JSON API: as before without parameters (every Source, by name); a listing with.
    let (_, all) = get("/api/sources").await;
    let all: serde_json::Value = serde_json::from_str(&all).expect("json");
    let names: Vec<&str> = all
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(names, ["archive", "museum"]);
    let (_, l) = get("/api/sources?state=ok&per_page=1").await;
    let l: serde_json::Value = serde_json::from_str(&l).expect("json");
    assert_eq!(l["summary"]["sources"], 2, "{l}");
    assert_eq!(l["summary"]["failing"], 1, "{l}");
    assert_eq!(l["summary"]["resources"], 2, "{l}");
    assert_eq!(l["matching"], 1, "{l}");
    assert_eq!(l["sources"][0]["name"], "museum", "{l}");
    let (s, _) = get("/api/sources?state=nope").await;
    assert_eq!(s, 400);
    agg.drain(Duration::from_secs(5)).await;
}
