//! The SQL of [`super::PgState`]: its schema, as migrations, and its statements.

/// The migrations: `MIGRATIONS[i]` takes a schema from version `i` to `i + 1` (0: empty), in
/// one transaction with the new version number. Text compared for order (URIs, Sources) is in
/// the "C" collation: byte order, as [`crate::Records::resources_page`] promises, whatever the
/// database's locale.
///
/// The rule for a new migration: it only adds (tables, columns with defaults, indexes) and
/// never drops, renames or changes what an earlier release reads or writes: workers of the
/// earlier release may still be running against the schema it migrated (they refuse only to
/// connect to it anew; see `docs/aggregate.md`, "Upgrading workers that share a state").
pub(super) const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE resources(
        uri TEXT COLLATE \"C\" PRIMARY KEY,
        source TEXT COLLATE \"C\" NOT NULL,
        path TEXT NOT NULL,
        length BIGINT,
        md5 TEXT,
        sha1 TEXT,
        sha256 TEXT,
        lastmod TEXT,
        etag TEXT,
        last_modified TEXT,
        gone BOOLEAN NOT NULL DEFAULT false
    );
    CREATE INDEX resources_source_uri ON resources(source, uri);
    -- A hash index: equality is all `has_path` needs, and it takes paths of any length.
    CREATE INDEX resources_path ON resources USING hash (path);
    CREATE TABLE sources(
        source TEXT PRIMARY KEY,
        cursor TEXT,
        synced_at TEXT
    );
    CREATE TABLE pending(
        source TEXT COLLATE \"C\" NOT NULL,
        uri TEXT COLLATE \"C\" NOT NULL,
        change TEXT,
        length BIGINT,
        hashes TEXT,
        lastmod TEXT,
        duplicates TEXT,
        error TEXT,
        PRIMARY KEY(source, uri)
    );
    CREATE TABLE leases(
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        token BIGINT NOT NULL,
        expires TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE work(
        key TEXT PRIMARY KEY,
        seq BIGINT GENERATED ALWAYS AS IDENTITY,
        source TEXT NOT NULL,
        payload TEXT NOT NULL,
        holder TEXT,
        token BIGINT NOT NULL DEFAULT 0,
        expires TIMESTAMPTZ,
        attempts INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX work_seq ON work(seq);
",
    "
    -- 2: the documents discovery found, per start URL.
    CREATE TABLE documents(
        start TEXT NOT NULL,
        role TEXT COLLATE \"C\" NOT NULL,
        url TEXT COLLATE \"C\" NOT NULL,
        etag TEXT,
        last_modified TEXT,
        PRIMARY KEY(start, role, url)
    );
",
    "
    -- 3: when every copy was last checked; the rows kept after a delete, indexed apart.
    ALTER TABLE sources ADD COLUMN checked_at TEXT;
    CREATE INDEX resources_gone ON resources(source, uri) WHERE gone;
",
    "
    -- 4: the queue tells who listens on `resourcesync_work` (LISTEN) that items were added
    -- (`SCHEMA insert`) or completed (`SCHEMA delete`), once per statement (and, by NOTIFY's
    -- rule, once per transaction), so that claimers and a coordinator waiting for its queue
    -- to drain are woken rather than poll; a Source's items are found by an index (the
    -- waiter's question: is any left?).
    CREATE INDEX work_source ON work(source);
    -- Room in each page for the claims' new row versions: a claim changes no indexed column,
    -- so that its update stays on the page (HOT) and writes no index entry.
    ALTER TABLE work SET (fillfactor = 50);
    CREATE FUNCTION work_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
        PERFORM pg_notify('resourcesync_work', TG_TABLE_SCHEMA || ' ' || lower(TG_OP));
        RETURN NULL;
    END
    $f$;
    CREATE TRIGGER work_added AFTER INSERT ON work
        FOR EACH STATEMENT EXECUTE FUNCTION work_changed();
    CREATE TRIGGER work_done AFTER DELETE ON work
        FOR EACH STATEMENT EXECUTE FUNCTION work_changed();
",
    "
    -- 5: the versions kept of each resource (`state/versions.rs`), and which name a body.
    CREATE TABLE versions(
        source TEXT COLLATE \"C\" NOT NULL,
        uri TEXT COLLATE \"C\" NOT NULL,
        seq BIGINT NOT NULL,
        digest TEXT NOT NULL,
        length BIGINT NOT NULL,
        datetime TEXT,
        first_seen TEXT NOT NULL,
        until TEXT,
        deleted BOOLEAN NOT NULL DEFAULT false,
        deleted_datetime TEXT,
        PRIMARY KEY(source, uri, seq)
    );
    CREATE INDEX versions_digest ON versions(digest);
",
    "
    -- 6: the workers that watch this Source's queue, each until its heartbeat expires
    -- (`postgres/workers.rs`): a coordinator queues its fetches only while another is alive.
    CREATE TABLE workers(
        name TEXT PRIMARY KEY,
        expires TIMESTAMPTZ NOT NULL
    );
",
];

/// The channel the queue's changes are told on (see migration 4).
pub(super) const WORK_CHANNEL: &str = "resourcesync_work";

/// The schema version this program writes.
pub(super) const VERSION: i64 = MIGRATIONS.len() as i64;

/// A timestamp as milliseconds since the Unix epoch.
macro_rules! ms {
    ($col:literal) => {
        concat!("floor(extract(epoch FROM ", $col, ") * 1000)::BIGINT")
    };
}

/// `now()` plus the time-to-live in milliseconds given as parameter `$n`.
macro_rules! until {
    ($n:literal) => {
        concat!("now() + $", $n, "::BIGINT * interval '1 millisecond'")
    };
}

/// The URI owning a path (`$1`), the least in byte order (`Records::path_owner`). The rows
/// are found by the index on `path` alone, whatever the planner knows of the table: written
/// `WHERE path = $1 ORDER BY uri LIMIT 1`, a table never analyzed (a new Source's schema
/// during its first sync, until autovacuum's next visit) leads the planner to walk the primary
/// key in URI order and filter on the path (it assumes a path is shared by 0.5% of the rows),
/// reading every row for a path not yet recorded: a baseline's lookups then grew with the
/// square of its size (issue 36 item 6; docs/performance.md). `OFFSET 0` keeps the
/// subquery a plan of its own, so that `min` cannot become that walk either.
pub(super) const PATH_OWNER: &str =
    "SELECT min(r.uri) FROM (SELECT uri FROM resources WHERE path = $1 OFFSET 0) AS r";

/// [`PATH_OWNER`] for each path of the array `$1`, in order, in one statement.
pub(super) const PATH_OWNERS: &str = "SELECT (SELECT min(r.uri) FROM \
     (SELECT uri FROM resources WHERE path = p.path OFFSET 0) AS r) \
     FROM unnest($1::text[]) WITH ORDINALITY AS p(path, n) ORDER BY p.n";

/// The columns of a row of a copy, in the order `row_to_record` reads them.
macro_rules! resource_cols {
    () => {
        "uri, source, path, length, md5, sha1, sha256, lastmod, etag, last_modified, gone"
    };
}

/// The columns of a pending change, in the order `row_to_pending` reads them.
macro_rules! pending_cols {
    () => {
        "source, uri, change, length, hashes, lastmod, duplicates, error"
    };
}

/// The row of a copy.
pub(super) const RESOURCE: &str = concat!(
    "SELECT ",
    resource_cols!(),
    " FROM resources WHERE uri = $1"
);
// A page of rows from `''` (every text is `>= ''`) or after `$2`: one condition, which the
// index on (source, uri) seeks with.
/// The first page of a Source's rows.
pub(super) const RESOURCES_FROM: &str = concat!(
    "SELECT ",
    resource_cols!(),
    " FROM resources WHERE source = $1 AND uri >= $2 ORDER BY uri LIMIT $3"
);
/// A page of a Source's rows after a URI.
pub(super) const RESOURCES_AFTER: &str = concat!(
    "SELECT ",
    resource_cols!(),
    " FROM resources WHERE source = $1 AND uri > $2 ORDER BY uri LIMIT $3"
);
/// The first page of a Source's rows kept after a delete (the partial index `resources_gone`).
pub(super) const GONE_FROM: &str = concat!(
    "SELECT ",
    resource_cols!(),
    " FROM resources WHERE source = $1 AND gone AND uri >= $2 ORDER BY uri LIMIT $3"
);
/// A page of a Source's rows kept after a delete, after a URI.
pub(super) const GONE_AFTER: &str = concat!(
    "SELECT ",
    resource_cols!(),
    " FROM resources WHERE source = $1 AND gone AND uri > $2 ORDER BY uri LIMIT $3"
);
/// The first page of a Source's pending changes.
pub(super) const PENDING_FROM: &str = concat!(
    "SELECT ",
    pending_cols!(),
    " FROM pending WHERE source = $1 AND uri >= $2 ORDER BY uri LIMIT $3"
);
/// A page of a Source's pending changes after a URI.
pub(super) const PENDING_AFTER: &str = concat!(
    "SELECT ",
    pending_cols!(),
    " FROM pending WHERE source = $1 AND uri > $2 ORDER BY uri LIMIT $3"
);

/// Writes (replaces) the row of a copy.
pub(super) const PUT_RESOURCE: &str = "INSERT INTO resources(uri, source, path, length, md5, sha1, \
     sha256, lastmod, etag, last_modified, gone) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (uri) DO UPDATE SET source = EXCLUDED.source, path = EXCLUDED.path, \
     length = EXCLUDED.length, md5 = EXCLUDED.md5, sha1 = EXCLUDED.sha1, \
     sha256 = EXCLUDED.sha256, lastmod = EXCLUDED.lastmod, etag = EXCLUDED.etag, \
     last_modified = EXCLUDED.last_modified, gone = EXCLUDED.gone";
/// Writes (replaces) a pending change.
pub(super) const PUT_PENDING: &str = "INSERT INTO pending(source, uri, change, length, hashes, lastmod, \
     duplicates, error) VALUES($1, $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT (source, uri) DO UPDATE SET change = EXCLUDED.change, \
     length = EXCLUDED.length, hashes = EXCLUDED.hashes, lastmod = EXCLUDED.lastmod, \
     duplicates = EXCLUDED.duplicates, error = EXCLUDED.error";
/// Writes the cursor of a Source.
pub(super) const SET_CURSOR: &str = "INSERT INTO sources(source, cursor, synced_at, checked_at) \
     VALUES($1, $2, $3, $4) ON CONFLICT (source) DO UPDATE SET cursor = EXCLUDED.cursor, \
     synced_at = EXCLUDED.synced_at, checked_at = EXCLUDED.checked_at";
/// Locks the lease's row while the batch runs: a takeover waits for the batch to commit.
pub(super) const FENCE: &str = "SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND token = $3 \
     AND expires > now() FOR SHARE";
/// Removes a claimed item while the claim is held.
pub(super) const COMPLETE: &str =
    "DELETE FROM work WHERE key = $1 AND holder = $2 AND token = $3 AND expires > now()";
/// Takes or renews a lease in one statement: inserted, or updated when its holder renews it or
/// it expired (the token kept on a renewal, raised otherwise); no row back while another
/// worker holds it. Concurrent takers of one name are serialised by its row.
pub(super) const LEASE: &str = concat!(
    "INSERT INTO leases AS l (name, holder, token, expires) VALUES($1, $2, 1, ",
    until!("3"),
    ") ON CONFLICT (name) DO UPDATE SET \
     token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires > now() \
         THEN l.token ELSE l.token + 1 END, \
     holder = EXCLUDED.holder, expires = EXCLUDED.expires \
     WHERE l.holder = EXCLUDED.holder OR l.expires <= now() \
     RETURNING token, ",
    ms!("expires")
);

/// Claims up to `$2` items no one holds (or whose claim expired), first queued first; rows
/// locked by another claimer at the same moment are skipped, not waited for.
pub(super) const CLAIM: &str = concat!(
    "WITH c AS (SELECT key FROM work WHERE holder IS NULL OR expires <= now() \
     ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED) \
     UPDATE work w SET holder = $1, token = w.token + 1, attempts = w.attempts + 1, expires = ",
    until!("3"),
    " FROM c WHERE w.key = c.key \
     RETURNING w.key, w.source, w.payload, w.token, ",
    ms!("w.expires"),
    ", w.attempts, w.seq"
);
