//! The few S3 XML responses an [`super::S3Store`] reads (ListObjectsV2, ListMultipartUploads,
//! InitiateMultipartUpload, CompleteMultipartUpload, Error), read as hostile input: the body is
//! capped before it gets here, nesting and text are bounded, and no entity is expanded beyond
//! the five predefined ones and character references.

use quick_xml::events::Event;

/// The deepest nesting read.
const MAX_DEPTH: usize = 8;
/// The longest text of one element kept (S3 keys are at most 1,024 bytes).
const MAX_TEXT: usize = 64 * 1024;

/// Calls `f(path, text)` at the end of every element, with the local names of the elements
/// from the root to it and its text (the text of its children included, which S3 never has).
pub(crate) fn leaves(body: &[u8], mut f: impl FnMut(&[String], &str)) -> Result<(), String> {
    let mut r = quick_xml::Reader::from_reader(body);
    let mut buf = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut text = String::new();
    loop {
        let ev = r
            .read_event_into(&mut buf)
            .map_err(|e| format!("malformed XML at byte {}: {e}", r.buffer_position()))?;
        match ev {
            Event::Start(e) => {
                if path.len() >= MAX_DEPTH {
                    return Err("XML nested too deep".into());
                }
                path.push(e.local_name().as_ref().to_owned());
                text.clear();
            }
            Event::Empty(e) => {
                if path.len() >= MAX_DEPTH {
                    return Err("XML nested too deep".into());
                }
                path.push(e.local_name().as_ref().to_owned());
                f(&path, "");
                path.pop();
            }
            Event::End(_) => {
                f(&path, &text);
                text.clear();
                path.pop();
            }
            Event::Text(t) => push(&mut text, &t)?,
            Event::CData(t) => push(&mut text, &t)?,
            Event::GeneralRef(g) => {
                let s = match g.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => quick_xml::escape::resolve_predefined_entity(&g)
                        .ok_or("an undefined XML entity")?
                        .to_owned(),
                };
                push(&mut text, &s)?;
            }
            Event::DocType(_) => return Err("a document type declaration".into()),
            Event::Eof => return Ok(()),
            _ => {}
        }
        buf.clear();
    }
}

fn push(text: &mut String, s: &str) -> Result<(), String> {
    if text.len() + s.len() > MAX_TEXT {
        return Err(format!("an XML text longer than {MAX_TEXT} bytes"));
    }
    text.push_str(s);
    Ok(())
}

/// One object of a listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    /// Its key (decoded when the listing was URL-encoded; bytes that are not UTF-8 replaced
    /// by U+FFFD, see `raw`).
    pub(crate) key: String,
    /// Its key's bytes as decoded (what the listing is ordered by).
    pub(crate) raw: Vec<u8>,
    /// Its size.
    pub(crate) size: u64,
    /// Its `ETag`, as given (quotes included).
    pub(crate) etag: Option<String>,
    /// Its `LastModified` (RFC 3339), as given.
    pub(crate) last_modified: Option<String>,
}

/// A page of ListObjectsV2.
#[derive(Debug, Default)]
pub(crate) struct ListPage {
    pub(crate) objects: Vec<Listed>,
    pub(crate) truncated: bool,
    pub(crate) next_token: Option<String>,
}

/// The bytes a listed key stands for.
fn url_decoded_bytes(s: &str, encoded: bool) -> Vec<u8> {
    if encoded {
        percent_encoding::percent_decode_str(&s.replace('+', " ")).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

fn url_decoded(s: &str, encoded: bool) -> String {
    if encoded {
        // `encoding-type=url` (asked for: XML 1.0 cannot carry every byte a key may hold).
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    } else {
        s.to_owned()
    }
}

/// Reads a ListObjectsV2 result (`ListBucketResult`).
pub(crate) fn list_page(body: &[u8]) -> Result<ListPage, String> {
    let mut page = ListPage::default();
    let mut raw: Vec<Listed> = Vec::new();
    let mut cur = Listed::default();
    let mut sizes_ok = true;
    let mut encoded = false;
    let mut root_ok = false;
    leaves(body, |path, text| {
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        match names.as_slice() {
            ["ListBucketResult"] => root_ok = true,
            ["ListBucketResult", "IsTruncated"] => page.truncated = text.trim() == "true",
            ["ListBucketResult", "NextContinuationToken"] => {
                page.next_token = Some(text.to_owned()).filter(|t| !t.is_empty());
            }
            ["ListBucketResult", "EncodingType"] => encoded = text.trim() == "url",
            ["ListBucketResult", "Contents", "Key"] => cur.key = text.to_owned(),
            ["ListBucketResult", "Contents", "ETag"] => cur.etag = Some(text.trim().to_owned()),
            ["ListBucketResult", "Contents", "LastModified"] => {
                cur.last_modified = Some(text.trim().to_owned());
            }
            ["ListBucketResult", "Contents", "Size"] => match text.trim().parse() {
                Ok(n) => cur.size = n,
                Err(_) => sizes_ok = false,
            },
            ["ListBucketResult", "Contents"] => raw.push(std::mem::take(&mut cur)),
            _ => {}
        }
    })?;
    if !root_ok {
        return Err("not a ListBucketResult".into());
    }
    if !sizes_ok {
        return Err("an object size that is not a number".into());
    }
    page.objects = raw
        .into_iter()
        .map(|mut o| {
            o.raw = url_decoded_bytes(&o.key, encoded);
            o.key = String::from_utf8_lossy(&o.raw).into_owned();
            o
        })
        .collect();
    Ok(page)
}

/// One multipart upload in progress.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pending {
    pub(crate) key: String,
    pub(crate) upload_id: String,
    /// When it was begun (`Initiated`, RFC 3339), if given.
    pub(crate) initiated: Option<String>,
}

/// A page of ListMultipartUploads.
#[derive(Debug, Default)]
pub(crate) struct UploadsPage {
    pub(crate) uploads: Vec<Pending>,
    pub(crate) truncated: bool,
    pub(crate) next_key: Option<String>,
    pub(crate) next_upload_id: Option<String>,
}

/// Reads a ListMultipartUploads result.
pub(crate) fn uploads_page(body: &[u8]) -> Result<UploadsPage, String> {
    let mut page = UploadsPage::default();
    let mut cur = Pending::default();
    let mut encoded = false;
    let mut root_ok = false;
    leaves(body, |path, text| {
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        match names.as_slice() {
            ["ListMultipartUploadsResult"] => root_ok = true,
            ["ListMultipartUploadsResult", "IsTruncated"] => page.truncated = text.trim() == "true",
            ["ListMultipartUploadsResult", "EncodingType"] => encoded = text.trim() == "url",
            ["ListMultipartUploadsResult", "NextKeyMarker"] => {
                page.next_key = Some(text.to_owned()).filter(|t| !t.is_empty());
            }
            ["ListMultipartUploadsResult", "NextUploadIdMarker"] => {
                page.next_upload_id = Some(text.to_owned()).filter(|t| !t.is_empty());
            }
            ["ListMultipartUploadsResult", "Upload", "Key"] => cur.key = text.to_owned(),
            ["ListMultipartUploadsResult", "Upload", "UploadId"] => {
                cur.upload_id = text.to_owned();
            }
            ["ListMultipartUploadsResult", "Upload", "Initiated"] => {
                cur.initiated = Some(text.trim().to_owned());
            }
            ["ListMultipartUploadsResult", "Upload"] => {
                page.uploads.push(std::mem::take(&mut cur));
            }
            _ => {}
        }
    })?;
    if !root_ok {
        return Err("not a ListMultipartUploadsResult".into());
    }
    for u in &mut page.uploads {
        u.key = url_decoded(&u.key, encoded);
    }
    if let Some(k) = &mut page.next_key {
        *k = url_decoded(k, encoded);
    }
    Ok(page)
}

/// The `UploadId` of an InitiateMultipartUpload result.
pub(crate) fn upload_id(body: &[u8]) -> Result<String, String> {
    let mut id = None;
    leaves(body, |path, text| {
        if path.len() == 2 && path[0] == "InitiateMultipartUploadResult" && path[1] == "UploadId" {
            id = Some(text.to_owned());
        }
    })?;
    id.filter(|i| !i.is_empty())
        .ok_or_else(|| "no UploadId in the answer".into())
}

/// The code and message of an `Error` document (S3 answers errors so, and may answer a
/// CompleteMultipartUpload with one after a `200 OK`).
pub(crate) fn error_of(body: &[u8]) -> Option<(String, String)> {
    let mut code = None;
    let mut message = String::new();
    leaves(body, |path, text| match path {
        [root, c] if root == "Error" && c == "Code" => code = Some(text.to_owned()),
        [root, m] if root == "Error" && m == "Message" => message = text.to_owned(),
        _ => {}
    })
    .ok()?;
    code.map(|c| (c, message))
}

/// The body of a CompleteMultipartUpload request: the parts by number and ETag.
pub(crate) fn complete_body(etags: &[String]) -> String {
    let mut s = String::from("<CompleteMultipartUpload>");
    for (i, e) in etags.iter().enumerate() {
        s.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
            i + 1,
            quick_xml::escape::escape(e.as_str())
        ));
    }
    s.push_str("</CompleteMultipartUpload>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_read_and_decoded() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>
<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>
<Contents><Key>p/sp%20ace/%C3%BC</Key><Size>5</Size><ETag>"abc"</ETag><LastModified>2024-01-02T03:04:05.678Z</LastModified></Contents>
<Contents><Key>p/a&amp;b</Key><Size>0</Size></Contents>
<Contents><Key>p/%FF</Key><Size>0</Size></Contents>
<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>"#;
        let p = list_page(body).expect("parses");
        assert!(p.truncated);
        assert_eq!(p.next_token.as_deref(), Some("tok"));
        assert_eq!(p.objects.len(), 3);
        assert_eq!(p.objects[0].key, "p/sp ace/ü");
        assert_eq!(p.objects[0].size, 5);
        assert_eq!(p.objects[0].etag.as_deref(), Some("\"abc\""));
        assert_eq!(
            p.objects[0].last_modified.as_deref(),
            Some("2024-01-02T03:04:05.678Z")
        );
        assert_eq!(p.objects[1].key, "p/a&b");
        assert_eq!(p.objects[1].etag, None);
        // Not UTF-8: the bytes kept, the key lossy.
        assert_eq!(p.objects[2].raw, b"p/\xff");
        assert_eq!(p.objects[2].key, "p/\u{fffd}");
    }

    #[test]
    fn hostile_xml_is_refused() {
        assert!(list_page(b"<Other/>").is_err());
        assert!(
            list_page(b"<ListBucketResult><Contents><Size>x</Size></Contents></ListBucketResult>")
                .is_err()
        );
        let deep = "<a>".repeat(100);
        assert!(leaves(deep.as_bytes(), |_, _| {}).is_err());
        assert!(list_page(b"<!DOCTYPE x [<!ENTITY e \"x\">]><ListBucketResult/>").is_err());
        let long = format!(
            "<ListBucketResult><Contents><Key>{}</Key></Contents></ListBucketResult>",
            "k".repeat(MAX_TEXT + 1)
        );
        assert!(list_page(long.as_bytes()).is_err());
    }

    #[test]
    fn errors_and_upload_ids_are_read() {
        let e = error_of(b"<Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>");
        assert_eq!(e, Some(("NoSuchBucket".into(), "gone".into())));
        assert_eq!(error_of(b"<CompleteMultipartUploadResult/>"), None);
        let id = upload_id(
            b"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>",
        );
        assert_eq!(id.as_deref(), Ok("u1"));
        assert!(complete_body(&["\"a<\"".into()]).contains("&quot;a&lt;&quot;"));
    }
}
