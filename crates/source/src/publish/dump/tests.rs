//! Unit tests of the module.

use super::*;

#[test]
fn large_file_threshold_leaves_room_for_deflate() {
    assert!(!needs_large_file(0));
    assert!(!needs_large_file(3 << 30));
    assert!(needs_large_file(u64::from(u32::MAX)));
    assert!(needs_large_file(u64::from(u32::MAX) - (1 << 20)));
    assert!(needs_large_file(u64::MAX));
    // Just under the threshold, the deflate margin (len/1024 + 1 MiB) pushes it over.
    assert!(needs_large_file(u64::from(u32::MAX) - (4 << 20)));
    assert!(!needs_large_file(u64::from(u32::MAX) - (6 << 20)));
}

#[test]
fn zip_names_are_literal_or_encoded() {
    assert_eq!(
        zip_name("r/", Path::new("a b/c#d.txt")).as_deref(),
        Some("r/a b/c#d.txt")
    );
    assert_eq!(
        zip_name("r/", Path::new("naïve/日本.txt")).as_deref(),
        Some("r/naïve/日本.txt")
    );
    assert_eq!(
        zip_name("r/", Path::new("a\nb\\c")).as_deref(),
        Some("r/a%0Ab%5Cc")
    );
    assert_eq!(zip_name("r/", Path::new("../x")), None);
    assert_eq!(zip_name("r/", Path::new("")), None);
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(b"caf\xe9.txt"));
        assert_eq!(zip_name("r/", p).as_deref(), Some("r/caf%E9.txt"));
    }
}

#[test]
fn records_round_trip() {
    let recs = vec![
        PackageRecord {
            from: W3cDateTime::parse("2024-01-01T00:00:00Z").ok(),
            until: W3cDateTime::parse("2024-01-02T00:00:00.123456Z").ok(),
            ..PackageRecord::new(
                "changedumps/changedump-00001.zip".into(),
                1234,
                Hashes::parse("md5:00 sha-256:11").0,
            )
        },
        PackageRecord::new(
            "dumps/resourcedump-000001-00001.zip".into(),
            0,
            Hashes::parse("md5:22").0,
        ),
        PackageRecord {
            at: W3cDateTime::parse("2024-01-01T00:00:00Z").ok(),
            completed: W3cDateTime::parse("2024-01-01T00:00:01Z").ok(),
            start: Some("http://example.com/a%20b".into()),
            fingerprint: Some("sha-256:33".into()),
            ..PackageRecord::new(
                "dumps/resourcedump-000002-00001.zip".into(),
                7,
                Hashes::parse("md5:44").0,
            )
        },
    ];
    assert_eq!(decode_records(&encode_records(&recs)), Some(recs.clone()));
    // Records of older versions (five fields) still read, without the Resource Dump's own.
    let old = "dumps/resourcedump-000001-00001.zip\t0\tmd5:22\t\t";
    assert_eq!(decode_records(old), Some(vec![recs[1].clone()]));
    assert_eq!(decode_records(""), Some(vec![]));
    assert_eq!(decode_records("x\tnot-a-number\tmd5:00\t\t"), None);
}

#[test]
fn compressed_types_and_short_bitstreams_are_stored() {
    let big = STORED_BELOW;
    assert_eq!(
        compression_for(Some("image/jpeg"), big),
        CompressionMethod::Stored
    );
    assert_eq!(
        compression_for(Some("video/mp4"), big),
        CompressionMethod::Stored
    );
    assert_eq!(
        compression_for(Some("text/plain"), big),
        CompressionMethod::Deflated
    );
    assert_eq!(compression_for(None, big), CompressionMethod::Deflated);
    // Short: a compressor set up per entry costs more than deflate saves.
    assert_eq!(
        compression_for(Some("text/plain"), big - 1),
        CompressionMethod::Stored
    );
    assert_eq!(compression_for(None, 0), CompressionMethod::Stored);
}

/// The ZIP64 (`large_file`) path, cheaply: a dump with every entry written with ZIP64
/// sizes opens and reads back byte for byte.
#[test]
fn zip64_entries_read_back() {
    use crate::source::{Source, SourceConfig};
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    std::fs::write(dir.path().join("a.txt"), "alpha".repeat(1000)).expect("write");
    std::fs::write(dir.path().join("b.jpg"), [0u8, 1, 2, 3, 255]).expect("write");
    std::fs::write(dir.path().join("empty"), "").expect("write");
    let mut cfg = SourceConfig::new(dir.path(), "http://example.com/");
    cfg.out = Some(out.path().to_owned());
    let mut s = Source::open(cfg).expect("open");
    s.scan().expect("scan");
    let rep = super::resource::write_resource_dump_with(
        s.layout(),
        s.state(),
        s.inventory(),
        &DumpOptions::default(),
        Some(0),
    )
    .expect("dump");
    assert_eq!((rep.packages, rep.files, rep.skipped), (1, 3, 0));
    let zip_path = s.layout().doc_path(&resource_dump_package_name(1, 1));
    let mut z = zip::ZipArchive::new(File::open(&zip_path).expect("open")).expect("zip");
    assert_eq!(z.len(), 4);
    for (name, want) in [
        ("resources/a.txt", "alpha".repeat(1000).into_bytes()),
        ("resources/b.jpg", vec![0u8, 1, 2, 3, 255]),
        ("resources/empty", vec![]),
    ] {
        let mut f = z.by_name(name).expect("entry");
        let mut got = Vec::new();
        f.read_to_end(&mut got).expect("read");
        assert_eq!(got, want, "{name}");
    }
    // The ZIP64 extended information extra field (header id 0x0001, APPNOTE 4.5.3) is in
    // the local headers.
    let raw = std::fs::read(&zip_path).expect("read");
    let local = [0x50u8, 0x4b, 0x03, 0x04];
    let zip64_locals = raw
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == local)
        .filter(|(i, _)| {
            let name_len = u16::from_le_bytes([raw[i + 26], raw[i + 27]]) as usize;
            let extra_len = u16::from_le_bytes([raw[i + 28], raw[i + 29]]) as usize;
            let extra = &raw[i + 30 + name_len..i + 30 + name_len + extra_len];
            extra.len() >= 2 && extra[0] == 1 && extra[1] == 0
        })
        .count();
    assert_eq!(zip64_locals, 3);
}
