# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_resourcesync_global_optspecs
    string join \n v/verbose q/quiet log-format= log-file= access-log h/help V/version
end

function __fish_resourcesync_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_resourcesync_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_resourcesync_using_subcommand
    set -l cmd (__fish_resourcesync_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c resourcesync -n "__fish_resourcesync_needs_command" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_needs_command" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_needs_command" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -s V -l version -d 'Print version'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "demo" -d 'Try it: a sample Source served on 127.0.0.1, explored, synced, changed, synced again and audited, each step with its figures (nothing to set up)'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "validate" -d 'Check documents against every rule of the specifications'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "inspect" -d 'Summarize a document: kind, entries, time span, digests'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "audit" -d 'Compare a synchronized directory with the Source\'s current state'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "explore" -d 'Show the tree of a Source\'s documents, each validated'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "simulate" -d 'Reproduce the model paper\'s experiments (consistency, latency, transfer efficiency of baseline, incremental and push), in virtual time or over loopback HTTP'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "completions" -d 'Print the completions of a shell (bash, zsh, fish, elvish, powershell)'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "man" -d 'Print the man page, or write a page per command into a directory (--out)'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "publish" -d 'Publish a directory as a Source: scan, record changes, write every document'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "serve" -d 'Serve a directory as a live Source: resources, documents, change detection'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "hub" -d 'Run a W3C WebSub hub: subscriptions, verification, signed deliveries with retries, state in SQLite (for Change Notification, `serve --hub`, `sync --watch --push`)'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "sync" -d 'Synchronize a directory with a Source: discovery, baseline, then incremental'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "aggregate" -d 'Follow many Sources as one service: copies per Source, a page for operators, a JSON API and metrics; SIGHUP reads the configuration again, SIGTERM drains'
complete -c resourcesync -n "__fish_resourcesync_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -l keep -d 'Keep the Source and the Destination, in DIR/source and DIR/destination (DIR is created; those two must not exist or be empty), and print their paths' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -l json -d 'Print a JSON report of the steps instead of text'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l max-findings -d 'Most findings reported per document (the rest are counted)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l max-bytes -d 'Largest document accepted, in bytes after decompression' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l timeout -d 'Timeout for fetching a URL, in seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l json -d 'Print a JSON report instead of text'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l rules -d 'List every rule with its id, severity and section, and exit'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand validate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -l max-bytes -d 'Largest document accepted, in bytes after decompression' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -l timeout -d 'Timeout for fetching a URL, in seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -l json -d 'Print JSON instead of text'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand inspect" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l state -d 'The state database (default DEST/.resourcesync/state.sqlite)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l set -d 'The Capability List to use when the Source has several' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l base-url -d 'The Source\'s base URL: resources under it map to the same relative path under DEST (default: where the Source Description\'s /.well-known/ is, else the origin)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l token -d 'A bearer token, sent to the host of URL only' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l rate -d 'Requests per second per host' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l timeout -d 'Seconds without data before a request is abandoned (then retried)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l retries -d 'Retries of a request after connection errors, timeouts, 429 and 5xx' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l max-time -d 'Time limit for the whole run, in seconds (work done is kept)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l ca-cert -d 'A PEM file of extra trusted root certificates, e.g. the private CA that signed a Source\'s certificate (`serve --tls-cert`); the system\'s roots stay trusted' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l http2-prior-knowledge -d 'Speak HTTP/2 without asking first (h2c with prior knowledge on http://, RFC 9113 §3.3; only h2 offered on https://): for Sources known to serve it; HTTP/1-only servers then fail. Without it HTTP/2 is still used over https whenever the server offers it (ALPN)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l json -d 'Print a JSON report'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l fast -d 'Do not read the copies: a copy whose size is the recorded length counts by the digests recorded when it was written (a copy changed in place without changing its size goes unnoticed). By default every copy the Source publishes a digest for is hashed'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand audit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l max-parts -d 'Most parts of an index (packages of a dump, entries of an archive) read per document; the rest are counted' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l max-documents -d 'Most documents read' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l max-depth -d 'Deepest level followed (the first document is level 0)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l messages -d 'Findings quoted per document' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l token -d 'A bearer token, sent to the host of URL only' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l timeout -d 'Seconds without data before a request is abandoned (then retried)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l retries -d 'Retries of a request after connection errors, timeouts, 429 and 5xx' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l max-time -d 'Time limit for the whole run, in seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l json -d 'Print the tree as JSON'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand explore" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l resources -d 'Resources at the Source at the start' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l change-interval -d 'Mean seconds between changes at the Source' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l change-dist -d 'How the times between changes are drawn' -r -f -a "fixed\t'Every --change-interval seconds exactly'
exp\t'Exponential times between changes, mean --change-interval (a Poisson process)'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l mix -d 'Weights of creates, updates and deletes' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l size -d 'Payload sizes: fixed:BYTES or uniform:MIN:MAX (the paper: at most 1 KiB)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l strategy -d 'How the Destination follows the Source' -r -f -a "baseline\t'Poll the Resource List every sync interval (a baseline diff each time)'
incremental\t'Poll the Change Lists every sync interval'
push\t'Change Notifications pushed to the Destination (WebSub; in real mode through the Source\'s embedded hub)'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l sync-interval -d 'Seconds between synchronizations (baseline, incremental)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l duration -d 'Seconds of changes (and of the measured interval)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l seed -d 'Seed of the workload (same seed, same changes, same results in model mode)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l mode -d 'Virtual time or real HTTP' -r -f -a "model\t'Virtual time: discrete events with a modelled network (fast)'
real\t'Our Source server and Destination over loopback HTTP, in real time'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l request-latency -d 'Model: seconds from a request to the first byte of its response' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l bandwidth -d 'Model: bytes per second of a response' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l concurrency -d 'Resource downloads in flight at once' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l sync-overhead -d 'Model: seconds of the Destination\'s own work per synchronization' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l publish-delay -d 'Model: seconds from a change to its publication by the Source' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l changelist-max-entries -d 'The Source closes its open Change List after this many changes' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l changelist-max-age -d 'The Source closes its open Change List after this many seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l grid -d 'Run a whole grid (model mode) and draw its figures instead of one run' -r -f -a "paper\t'The paper\'s grid: N in {100, 1k, 10k, 25k, 50k}, change interval {0.1, 10} s, sync interval {10, 100} s; baseline, incremental and push'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l out -d 'Write the metrics as CSV here (DIR/simulate.csv, one row per run, appended; for --grid, DIR/grid.csv and the figures)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l json -d 'Print the metrics as JSON'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand simulate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand completions" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand completions" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand completions" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand completions" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand completions" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand man" -l out -d 'Write a page per command into this directory (resourcesync.1, resourcesync-serve.1, …) instead of printing the page of `resourcesync` itself' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand man" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand man" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand man" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand man" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand man" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l inventory -d 'Publish the resources of another inventory instead of DIR\'s files: postgres://USER@HOST:PORT/DB?table=T, s3://…, oai-pmh:URL (see docs/inventories.md)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l base-url -d 'The URL the directory is served at (resources map to BASE/relative/path)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l state -d 'The state database (default DIR/.resourcesync/state.sqlite)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l hash -d 'Digests to publish, comma-separated: md5, sha-1, sha-256' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l exclude -d 'Leave out paths matching a glob (gitignore syntax); repeatable' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l max-entries -d 'Split documents into an index past this many entries (Sitemap limit: 50000)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l changelist-max-entries -d 'Close the open Change List after this many changes' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l changelist-max-age -d 'Close the open Change List after this many seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l keep-resource-lists -d 'Earlier Resource Lists to keep in the Resource List Archive' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l dump-max-bytes -d 'Largest dump package, in bytes (uncompressed content)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l dump-max-files -d 'Most files in one dump package (at most 50000; fewer per package means a re-publish rewrites fewer of them)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l config -d 'Read flags from this TOML file (keys named as the long flags, `listen = "…"`, and the arguments, `dir = "…"`): the command line, then the environment (RESOURCESYNC_*), then the file, then the defaults. See docs/operations.md' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l out -d 'Where to write the documents (default: DIR itself, under DIR/resourcesync/ and DIR/.well-known/resourcesync), or a bucket: s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R (see docs/inventories.md)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l move -d 'Move the Source to --base-url (for `serve`, by default, its listen address) when its state was published under another URL: every resource and the change history are carried over to the new URLs, and every document is written again under them. Destinations then sync from the new URL'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l include-hidden -d 'Publish dotfiles and dot-directories too'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l dumps -d 'Also offer a Resource Dump (ZIP packages of every resource) and Change Dumps (one per closed Change List)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l print-config -d 'Print the effective configuration as TOML, each value with where it came from, and exit'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l json -d 'Print a JSON report'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand publish" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l inventory -d 'Publish the resources of another inventory instead of DIR\'s files: postgres://USER@HOST:PORT/DB?table=T, s3://…, oai-pmh:URL (see docs/inventories.md)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l base-url -d 'The URL the directory is served at (resources map to BASE/relative/path)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l state -d 'The state database (default DIR/.resourcesync/state.sqlite)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l hash -d 'Digests to publish, comma-separated: md5, sha-1, sha-256' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l exclude -d 'Leave out paths matching a glob (gitignore syntax); repeatable' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l max-entries -d 'Split documents into an index past this many entries (Sitemap limit: 50000)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l changelist-max-entries -d 'Close the open Change List after this many changes' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l changelist-max-age -d 'Close the open Change List after this many seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l keep-resource-lists -d 'Earlier Resource Lists to keep in the Resource List Archive' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l dump-max-bytes -d 'Largest dump package, in bytes (uncompressed content)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l dump-max-files -d 'Most files in one dump package (at most 50000; fewer per package means a re-publish rewrites fewer of them)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l config -d 'Read flags from this TOML file (keys named as the long flags, `listen = "…"`, and the arguments, `dir = "…"`): the command line, then the environment (RESOURCESYNC_*), then the file, then the defaults. See docs/operations.md' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l listen -d 'Address to listen on (port 0 picks a free port). The default --base-url is http://LISTEN/ with the port actually bound; a Source served without --base-url follows that address from run to run (its state moves with it)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l out -d 'Where to write the documents (default: DIR/.resourcesync/www, or STATE-www next to --state), so that DIR itself is never written to' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l resourcelist-interval -d 'Regenerate the Resource List at most this often; Change Lists are updated on every change' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l rescan-interval -d 'Rescan the whole directory this often, as a safety net for missed watcher events' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l full-every -d 'With an inventory that has a change feed (PostgreSQL, OAI-PMH): list every resource at startup and then at least this often, to find resources removed without a trace the feed sees (a row deleted from the table); the rescans in between read the feed' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l hub -d 'Push Change Notifications and Framework Notifications over WebSub through this hub: a hub URL, or `embedded` to run one in this process at BASE/resourcesync/hub. The Capability List then advertises the topics' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l debounce-ms -d 'Quiet time after a file-system event before changes are scanned, in milliseconds (default 200, or 10 with --hub, where notification latency matters)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l hub-private-addresses -d 'With --hub embedded: whether the hub sends verifications and deliveries to private addresses (loopback, RFC 1918, link-local, …); `auto` does when `--listen` is a loopback or private address (see `resourcesync hub --help`)' -r -f -a "auto\t'When the hub listens on a loopback or private address'
allow\t'Always'
deny\t'Never'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l tls-cert -d 'Serve over TLS with this PEM certificate chain (the server\'s certificate first), offering HTTP/2 and HTTP/1.1 by ALPN; the default --base-url becomes https://LISTEN/. Needs --tls-key' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l tls-key -d 'The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l move -d 'Move the Source to --base-url (for `serve`, by default, its listen address) when its state was published under another URL: every resource and the change history are carried over to the new URLs, and every document is written again under them. Destinations then sync from the new URL'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l include-hidden -d 'Publish dotfiles and dot-directories too'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l dumps -d 'Also offer a Resource Dump (ZIP packages of every resource) and Change Dumps (one per closed Change List)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l print-config -d 'Print the effective configuration as TOML, each value with where it came from, and exit'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l no-watch -d 'Do not use a file-system watcher: find changes by the periodic rescan only'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l config -d 'Read flags from this TOML file (keys named as the long flags, `listen = "…"`, and the arguments, `dir = "…"`): the command line, then the environment (RESOURCESYNC_*), then the file, then the defaults. See docs/operations.md' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l listen -d 'Address to listen on (port 0 picks a free port)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l public-url -d 'The hub\'s URL as publishers and subscribers reach it (default http://LISTEN/ with the port actually bound)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l state -d 'The SQLite database of subscriptions and pending deliveries (survives restarts)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l lease -d 'Lease granted when the subscriber asks for none, in seconds (WebSub §8.2: 10 days)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l min-lease -d 'Shortest lease granted, in seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l max-lease -d 'Longest lease granted, in seconds' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l allow-topic -d 'Relay only topics under this URL (repeatable; default: any topic). Compared as parsed URLs: the same scheme, host and port, and a path under this one\'s, whole segments only, after `.` and `..` (also percent-encoded) are resolved; URLs with user information (`user@`) are refused. `http://h/topics/` takes `http://h/topics/a`, not `http://h/topics/../admin` nor `http://h/topicsecret`' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l max-pending-bytes -d 'Bytes of payloads kept for pending deliveries, in all (on disk, in --state): past it the oldest payloads are dropped with a log line (their subscribers, failing or slow, catch up from the Change List), and a payload larger than this is refused' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l idle-timeout -d 'Close a connection after this many seconds without reading or writing (an idle keep-alive connection, a stalled request head), as `serve` does' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l private-addresses -d 'Whether the hub sends verifications, deliveries and topic fetches to private addresses (loopback, RFC 1918, link-local, …): `auto` does when the hub itself listens on a loopback or private address, not when it listens on a public address or on every interface, where strangers could make it call into its network' -r -f -a "auto\t'When the hub listens on a loopback or private address'
allow\t'Always'
deny\t'Never'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l print-config -d 'Print the effective configuration as TOML, each value with where it came from, and exit'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l json -d 'Print the startup line as JSON'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand hub" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l state -d 'The state database (default DEST/.resourcesync/state.sqlite)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l set -d 'The Capability List to use when the Source has several' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l base-url -d 'The Source\'s base URL: resources under it map to the same relative path under DEST (default: where the Source Description\'s /.well-known/ is, else the origin)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l token -d 'A bearer token, sent to the host of URL only' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l rate -d 'Requests per second per host' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l timeout -d 'Seconds without data before a request is abandoned (then retried)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l retries -d 'Retries of a request after connection errors, timeouts, 429 and 5xx' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l max-time -d 'Time limit for the whole run, in seconds (work done is kept)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l ca-cert -d 'A PEM file of extra trusted root certificates, e.g. the private CA that signed a Source\'s certificate (`serve --tls-cert`); the system\'s roots stay trusted' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l concurrency -d 'The most downloads in flight per host: the number adapts below it, from 32 (more when the first round trips are long), to what the Source answers (grows while throughput grows, halves on 429/503; docs/wide-area.md)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l max-resource-size -d 'Largest resource accepted when the Source publishes no length, in bytes' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l max-package-size -d 'Largest dump package downloaded, in bytes' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l check-every -d 'How often every copy is checked against the state (as --check does): when the last completed check, recorded in the state, is older than this (30m, 12h, 7d; 0: every run; never: only with --check). Between checks a run costs what changed: a copy damaged on disk is found by the next check (or `audit`)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l include -d 'Copy only resources whose name matches PATTERN (repeatable), as written under DEST (decoded: \'b 1.txt\', not \'b%201.txt\'): without `/` the file name at any depth (\'*.pdf\'); with `/` the path from DEST\'s top (\'/docs/*\', \'docs/*\'), at any depth when it starts with `*` (\'*/日本語/*\'); starting with http:// or https:// the whole URI as published. `*` any characters, `/` included, `?` one, `{a,b}` either. Resources left out are left alone: not fetched, their earlier copies neither updated nor deleted, even by --delete. A pattern that matched no resource of a baseline is warned about' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l exclude -d 'Leave out resources whose name matches PATTERN (as --include; repeatable; wins over --include)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l bandwidth -l bwlimit -d 'Most bytes of bodies received per second: 10MB/s, 500KiB/s, 100Mbit/s (a number alone is bytes)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l interval -d 'Seconds between two polls (with --watch)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l callback-listen -d 'Where the callback server listens (with --push)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l callback-url -d 'The callback\'s base URL as the hub reaches it (default http://LISTEN/ with the port bound; with --push)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l config -d 'Read flags from this TOML file (keys named as the long flags, `listen = "…"`, and the arguments, `dir = "…"`): the command line, then the environment (RESOURCESYNC_*), then the file, then the defaults. See docs/operations.md' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l http2-prior-knowledge -d 'Speak HTTP/2 without asking first (h2c with prior knowledge on http://, RFC 9113 §3.3; only h2 offered on https://): for Sources known to serve it; HTTP/1-only servers then fail. Without it HTTP/2 is still used over https whenever the server offers it (ALPN)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l json -d 'Print a JSON report'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l delete -d 'Remove what the Source does not have, as rsync --delete does: copies of resources the Source deleted (otherwise they are kept and reported), then the files under DEST that no resource maps to (the audit\'s "extra" files; directories left empty go too). Never DEST/.resourcesync nor a --state inside DEST, never outside DEST, never through a symbolic link (a link is removed, not followed); files that --include/--exclude leave out are protected. With --dry-run, listed ("would delete-extra") and not removed. "No resource maps to" means no row of the state database names the file: Sources synced into one DEST keep their copies when they share the state (the default), not when each has its own --state. Each run walks DEST once more (as `audit` does)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l dry-run -d 'Report what would be done; fetch no resource, write nothing'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l no-dump -d 'Do not baseline from the Source\'s Resource Dump: fetch every resource on its own'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l prefer-dumps -d 'Apply the Source\'s Change Dump packages before reading its Change Lists'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l checksum -d 'Check every copy in this run, and hash it too, to find edits that kept its length and time (implies --check)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l check -d 'Check every copy on disk against the state in this run, whatever --check-every says: a copy missing, of another length or with another modification time than the sync gave it is fetched again'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l no-check -d 'Never check the copies on disk against the state (not even with --check-every)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l watch -d 'After the first sync, keep following the Source: poll its Change Lists and apply new changes, until SIGINT or SIGTERM (the round in progress is finished; a second signal stops at once)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l push -d 'Receive changes pushed over WebSub (Change Notification): subscribe to the hub the Capability List advertises, apply each notification as it arrives, and catch up from the Change List on a gap, at start, and when nothing arrived for --interval seconds'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l print-config -d 'Print the effective configuration as TOML, each value with where it came from, and exit'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand sync" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l config -d 'The configuration: the Sources to follow (`[[source]]` with name, url, schedule, …) and shared limits (see docs/aggregate.md). Read again on SIGHUP' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l store -d 'Where the copies go: a directory, one folder per Source named as the Source (default: `copies` beside the configuration file), or an S3-compatible bucket, s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R (each Source under PREFIX/NAME/; credentials also from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l work -d 'With an s3:// store: the local directory of each Source\'s scratch space and, by default, its state (default: `work` beside the configuration file)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l state -d 'Where each Source\'s state goes: a directory of SQLite databases (NAME.sqlite), or postgres://USER@HOST:PORT/DB (a schema per Source). Default: SQLite inside each Source\'s folder' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l worker -d 'This worker\'s name among the processes sharing a PostgreSQL state (default: host, process id and a random suffix)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l serve -d 'Serve the page for operators, /api/sources (JSON) and /metrics (Prometheus) here, and republish the copies as a ResourceSync Source: a Source Description at /.well-known/resourcesync, each Source under /rs/NAME/ (see docs/aggregate.md)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l base-url -d 'The URL the aggregator is reached at, which the republished documents name (default: http://ADDR/ of --serve)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l grace -d 'On SIGTERM or SIGINT, how long running syncs may take to finish before they are stopped (a stopped sync loses only the downloads in flight)' -r
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l log-format -d 'Format of the log lines of `serve`, `hub` and `aggregate`' -r -f -a "text\t'One line per event for people: time, level, target, fields'
json\t'One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors'"
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l log-file -d 'Append the log to this file instead of writing it to standard error (created if missing; reopened by a restart, so rotate by moving it and restarting or with `copytruncate`)' -r -F
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l json -d 'Print the start line as JSON'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l print-config -d 'Print the effective flags as TOML (from the command line, RESOURCESYNC_*, the top-level keys of the configuration file, or the defaults), each with where it came from, and exit'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -s v -l verbose -d 'More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round, `publish` lists the documents written, `explore` every finding'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -s q -l quiet -d 'Say less: no progress and no summaries, only errors and warnings (`serve` and `hub` log warnings and errors; `validate` reports errors only; `sync` and `audit` print nothing on success, and their summary on standard error when a resource failed or a copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -l access-log -d 'Log every request `serve` and `hub` answer: remote, method, path, status, bytes, duration_ms (target `access`; also on with `RUST_LOG=access=info`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand aggregate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "demo" -d 'Try it: a sample Source served on 127.0.0.1, explored, synced, changed, synced again and audited, each step with its figures (nothing to set up)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "validate" -d 'Check documents against every rule of the specifications'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "inspect" -d 'Summarize a document: kind, entries, time span, digests'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "audit" -d 'Compare a synchronized directory with the Source\'s current state'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "explore" -d 'Show the tree of a Source\'s documents, each validated'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "simulate" -d 'Reproduce the model paper\'s experiments (consistency, latency, transfer efficiency of baseline, incremental and push), in virtual time or over loopback HTTP'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "completions" -d 'Print the completions of a shell (bash, zsh, fish, elvish, powershell)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "man" -d 'Print the man page, or write a page per command into a directory (--out)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "publish" -d 'Publish a directory as a Source: scan, record changes, write every document'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "serve" -d 'Serve a directory as a live Source: resources, documents, change detection'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "hub" -d 'Run a W3C WebSub hub: subscriptions, verification, signed deliveries with retries, state in SQLite (for Change Notification, `serve --hub`, `sync --watch --push`)'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "sync" -d 'Synchronize a directory with a Source: discovery, baseline, then incremental'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "aggregate" -d 'Follow many Sources as one service: copies per Source, a page for operators, a JSON API and metrics; SIGHUP reads the configuration again, SIGTERM drains'
complete -c resourcesync -n "__fish_resourcesync_using_subcommand help; and not __fish_seen_subcommand_from demo validate inspect audit explore simulate completions man publish serve hub sync aggregate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
