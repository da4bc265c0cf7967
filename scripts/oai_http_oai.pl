#!/usr/bin/perl
# The second OAI-PMH data provider of the tests (started by scripts/oai-http-oai.sh), built on
# Perl's HTTP::OAI (Debian `libhttp-oai-perl`, CPAN HTTP-OAI; independent of pyoai/oaipmh).
#
# The protocol is HTTP::OAI's: HTTP::OAI::Repository::validate_request checks the requests
# (verbs, arguments, dates), and the responses (Identify, ListMetadataFormats, ListRecords,
# ListIdentifiers, GetRecord, the errors) are HTTP::OAI objects written by the library. Where it
# differs from the first provider, it differs as HTTP::OAI does: a deleted record carries its
# metadata when the record object has some (HTTP::OAI::Record::generate writes it whatever the
# header's status), the last page of a list has no resumptionToken at all (PartialList writes
# none for an empty token), tokens carry `cursor` and `completeListSize` attributes.
# This file holds the records: several repositories at once, served at /NAME/oai, changed
# while the server runs through POST /NAME/admin (JSON):
#
#   {"reset": {"batch_size": 50, "granularity": "YYYY-MM-DD"}}       make (or empty) NAME
#   {"generate": {"count": 300, "deleted_every": 10, "prefix": "oai:x:"}}
#       every deleted_every'th deleted, every other one of those still carrying its metadata
#   {"put": [{"id": "oai:x:1", "title": "...", "datestamp": "2026-01-01T00:00:00Z"}]}
#   {"delete": ["oai:x:1"], "delete_with_metadata": ["oai:x:2"]}     status="deleted" from now
#
# A record's datestamp is the time of its last change (now) unless given, shown in the
# repository's granularity (YYYY-MM-DD by default, as many Perl repositories answer).
# Answers {"records": N}. Resumption tokens look like DSpace's: PREFIX/FROM/UNTIL/CURSOR.
#
# Usage: perl oai_http_oai.pl --port-file FILE [--records 300] [--batch-size 50]
use strict;
use warnings;

use Getopt::Long;
use HTTP::Daemon;
use HTTP::Response;
use HTTP::Status qw(:constants);
use JSON::PP;
use POSIX qw(strftime);
use Time::Local qw(timegm);
use URI;

use HTTP::OAI;
use HTTP::OAI::Metadata::OAI_DC;
use HTTP::OAI::Repository qw(:validate);

my ($port_file, $records, $deleted_every, $batch_size) = (undef, 300, 10, 50);
GetOptions(
    'port-file=s'     => \$port_file,
    'records=i'       => \$records,
    'deleted-every=i' => \$deleted_every,
    'batch-size=i'    => \$batch_size,
) or die "usage: perl oai_http_oai.pl --port-file FILE\n";
die "--port-file is required\n" unless $port_file;

my $d = HTTP::Daemon->new(LocalAddr => '127.0.0.1', LocalPort => 0, ReuseAddr => 1)
    or die "oai-http-oai: cannot listen on 127.0.0.1: $!\n";
my $root = "http://127.0.0.1:" . $d->sockport . "/";
my %repos;

sub iso { strftime("%Y-%m-%dT%H:%M:%SZ", gmtime($_[0])) }

sub parse_time {
    my $s = shift;
    $s =~ /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})Z)?$/ or die "bad date $s\n";
    return timegm($6 // 0, $5 // 0, $4 // 0, $3, $2 - 1, $1);
}

sub new_repo {
    my ($name, %o) = @_;
    my $g = $o{granularity} // 'YYYY-MM-DD';
    die "granularity $g\n" unless $g eq 'YYYY-MM-DD' || $g eq 'YYYY-MM-DDThh:mm:ssZ';
    $repos{$name} = {
        name => $name, batch => $o{batch_size} // 50, granularity => $g, records => {},
    };
}

# The datestamp as the repository shows it.
sub stamp {
    my ($repo, $t) = @_;
    my $s = iso($t);
    return $repo->{granularity} eq 'YYYY-MM-DD' ? substr($s, 0, 10) : $s;
}

sub dc_of {
    my ($ident, $rec) = @_;
    my %dc = map { $_ => [$rec->{$_}] } grep { defined $rec->{$_} && $rec->{$_} ne '' }
        qw(title creator subject description date);
    $dc{identifier} = [$ident];
    return \%dc;
}

sub generate_records {
    my ($repo, $count, $every, $prefix) = @_;
    my $base = timegm(0, 0, 0, 1, 0, 2020);
    my $nth_deleted = 0;
    for my $i (0 .. $count - 1) {
        my $ident = sprintf("%s%06d", $prefix, $i);
        my $deleted = $every > 0 && $i % $every == $every - 1;
        my $t = $base + (($i % 28) * 86400) + (($i % 24) * 3600) + (($i % 60) * 60);
        $repo->{records}{$ident} = {
            time => $t,
            deleted => $deleted,
            # Every other deleted record keeps its metadata (sent with the deleted header).
            keep => $deleted && ($nth_deleted++ % 2 == 0),
            dc => {
                title => ["Record $i of $repo->{name}"],
                creator => ["Author " . ($i % 17)],
                description => ["Description $i: " . ("lorem ipsum " x ($i % 5))],
                identifier => [$ident],
            },
        };
    }
}

sub delete_record {
    my ($repo, $ident, $keep) = @_;
    my $old = $repo->{records}{$ident};
    $repo->{records}{$ident} = {
        time => time, deleted => 1, keep => $keep,
        dc => $old ? $old->{dc} : { identifier => [$ident] },
    };
}

sub record_of {
    my ($repo, $ident, $r, $headers_only) = @_;
    my $h = HTTP::OAI::Header->new(identifier => $ident, datestamp => stamp($repo, $r->{time}));
    $h->status('deleted') if $r->{deleted};
    return $h if $headers_only;
    my $rec = HTTP::OAI::Record->new(header => $h);
    if (!$r->{deleted} || $r->{keep}) {
        $rec->metadata(HTTP::OAI::Metadata::OAI_DC->new(dc => $r->{dc}));
    }
    return $rec;
}

sub selected {
    my ($repo, $from, $until) = @_;
    my $recs = $repo->{records};
    my @ids = sort { $recs->{$a}{time} <=> $recs->{$b}{time} || $a cmp $b } keys %$recs;
    return grep {
        my $s = stamp($repo, $recs->{$_}{time});
        (!defined $from || $s ge $from) && (!defined $until || $s le $until)
    } @ids;
}

sub oai_error { HTTP::OAI::Error->new(code => $_[0], message => $_[1]) }

# The OAI-PMH answer to the arguments %a: an HTTP::OAI::Response (its content or errors).
sub answer {
    my ($repo, $url, %a) = @_;
    my $resp = HTTP::OAI::Response->new(requestURL => $url);
    if (my @errs = HTTP::OAI::Repository::validate_request(%a)) {
        $resp->errors($_) for @errs;
        return $resp;
    }
    my $verb = $a{verb};
    my $g = $repo->{granularity};
    for my $k (qw(from until)) {
        next unless defined $a{$k};
        if ($g eq 'YYYY-MM-DD' && length($a{$k}) != 10) {    # OAI-PMH 2.0 3.3.2
            $resp->errors(oai_error('badArgument', "$k is finer than the granularity $g"));
            return $resp;
        }
    }
    if ($verb eq 'Identify') {
        $resp->content(HTTP::OAI::Identify->new(
            repositoryName => "resourcesync test repository $repo->{name} (HTTP::OAI)",
            baseURL => "${root}$repo->{name}/oai",
            protocolVersion => '2.0',
            adminEmail => 'tests@example.invalid',
            earliestDatestamp => $g eq 'YYYY-MM-DD' ? '2000-01-01' : '2000-01-01T00:00:00Z',
            deletedRecord => 'persistent',
            granularity => $g,
        ));
        return $resp;
    }
    if ($verb eq 'ListSets') {
        $resp->errors(oai_error('noSetHierarchy', 'this repository has no sets'));
        return $resp;
    }
    if ($verb eq 'ListMetadataFormats') {
        if (defined $a{identifier} && !$repo->{records}{$a{identifier}}) {
            $resp->errors(oai_error('idDoesNotExist', $a{identifier}));
            return $resp;
        }
        my $l = HTTP::OAI::ListMetadataFormats->new;
        $l->metadataFormat(HTTP::OAI::MetadataFormat->new(
            metadataPrefix => 'oai_dc',
            schema => 'http://www.openarchives.org/OAI/2.0/oai_dc.xsd',
            metadataNamespace => 'http://www.openarchives.org/OAI/2.0/oai_dc/',
        ));
        $resp->content($l);
        return $resp;
    }
    my ($prefix, $from, $until, $cursor) = ($a{metadataPrefix}, $a{from}, $a{until}, 0);
    if (defined $a{resumptionToken}) {
        my @t = split m{/}, $a{resumptionToken}, -1;
        if (@t != 4 || $t[3] !~ /^\d+$/) {
            $resp->errors(oai_error('badResumptionToken', "not a token: $a{resumptionToken}"));
            return $resp;
        }
        ($prefix, $from, $until, $cursor) = @t;
        $from = undef if $from eq '';
        $until = undef if $until eq '';
    }
    if (defined $a{set}) {
        $resp->errors(oai_error('noSetHierarchy', 'this repository has no sets'));
        return $resp;
    }
    if ($prefix ne 'oai_dc') {
        $resp->errors(oai_error('cannotDisseminateFormat', "no format $prefix here"));
        return $resp;
    }
    if ($verb eq 'GetRecord') {
        my $r = $repo->{records}{$a{identifier}};
        if (!$r) {
            $resp->errors(oai_error('idDoesNotExist', $a{identifier}));
            return $resp;
        }
        my $l = HTTP::OAI::GetRecord->new;
        $l->record(record_of($repo, $a{identifier}, $r));
        $resp->content($l);
        return $resp;
    }
    my @ids = selected($repo, $from, $until);
    if (!@ids) {
        $resp->errors(oai_error('noRecordsMatch', 'no record matches'));
        return $resp;
    }
    my $headers = $verb eq 'ListIdentifiers';
    my $l = $headers ? HTTP::OAI::ListIdentifiers->new : HTTP::OAI::ListRecords->new;
    my $end = $cursor + $repo->{batch};
    $end = @ids if $end > @ids;
    for my $i ($cursor .. $end - 1) {
        my $x = record_of($repo, $ids[$i], $repo->{records}{$ids[$i]}, $headers);
        $headers ? $l->header($x) : $l->record($x);
    }
    # PartialList writes a token only when it is not empty: the last page has none.
    my $next = $end < @ids ? join('/', $prefix, $from // '', $until // '', $end) : '';
    $l->resumptionToken(HTTP::OAI::ResumptionToken->new(
        resumptionToken => $next, cursor => $cursor, completeListSize => scalar(@ids),
    ));
    $resp->content($l);
    return $resp;
}

sub admin {
    my ($name, $body) = @_;
    my $cmd = decode_json($body || '{}');
    new_repo($name, %{ $cmd->{reset} // {} }) if $cmd->{reset} || !$repos{$name};
    my $repo = $repos{$name};
    if (my $g = $cmd->{generate}) {
        generate_records($repo, $g->{count} // 300, $g->{deleted_every} // 10,
            $g->{prefix} // "oai:$name:");
    }
    for my $rec (@{ $cmd->{put} // [] }) {
        my $t = defined $rec->{datestamp} ? parse_time($rec->{datestamp}) : time;
        $repo->{records}{ $rec->{id} } =
            { time => $t, deleted => 0, keep => 0, dc => dc_of($rec->{id}, $rec) };
    }
    delete_record($repo, $_, 0) for @{ $cmd->{delete} // [] };
    delete_record($repo, $_, 1) for @{ $cmd->{delete_with_metadata} // [] };
    return encode_json({ records => scalar(keys %{ $repo->{records} }) });
}

sub serve {
    my ($c, $req) = @_;
    $c = ClosingConn->new($c);
    my @segs = grep { length } split m{/}, $req->uri->path;
    my $plain = sub {
        my ($code, $text) = @_;
        my $r = HTTP::Response->new($code, undef, ['Content-Type' => 'text/plain'], $text);
        $c->send_response($r);
    };
    return $plain->(404, "not found\n") unless @segs == 2;
    my ($name, $what) = @segs;
    if ($what eq 'admin' && $req->method eq 'POST') {
        my $out = eval { admin($name, $req->content) };
        return $plain->(400, "$@") unless defined $out;
        return $c->send_response(
            HTTP::Response->new(200, undef, ['Content-Type' => 'application/json'], $out));
    }
    return $plain->(404, "not found\n") unless $what eq 'oai';
    my $repo = $repos{$name} or return $plain->(404, "no such repository\n");
    my $u = URI->new('http:');
    $u->query($req->method eq 'POST' ? $req->content : $req->uri->query);
    my %a = $u->query_form;
    my $resp = answer($repo, "${root}$name/oai?" . ($u->query // ''), %a);
    my $xml = $resp->toDOM->toString(1);    # bytes, UTF-8
    $c->send_response(HTTP::Response->new(
        200, undef, ['Content-Type' => 'text/xml; charset=utf-8'], $xml));
}

# The connection, each response saying `Connection: close`.
package ClosingConn {
    sub new { my ($class, $c) = @_; bless { c => $c }, $class }
    sub send_response {
        my ($self, $r) = @_;
        $r->header(Connection => 'close');
        $self->{c}->send_response($r);
    }
}

new_repo('fixture', batch_size => $batch_size);
generate_records($repos{fixture}, $records, $deleted_every, 'oai:fixture:');
open(my $fh, '>', "$port_file.tmp") or die "$port_file.tmp: $!\n";
print $fh $d->sockport, "\n";
close $fh;
rename("$port_file.tmp", $port_file) or die "$port_file: $!\n";
print STDERR "oai-http-oai: serving $root (HTTP::OAI $HTTP::OAI::VERSION)\n";
$SIG{PIPE} = 'IGNORE';
while (my $c = $d->accept) {
    $c->timeout(30);
    # One request a connection (Connection: close): one slow client holds no other up long.
    # HTTP::Daemon closes after a forced last request without saying so: the header says it.
    if (my $req = $c->get_request) {
        $c->force_last_request;
        eval { serve($c, $req); 1 } or do {
            print STDERR "oai-http-oai: $@";
            $c->send_error(500, "$@");
        };
    }
    $c->close;
    undef $c;
}
