//! The URL check of `/call`: the `url` query parameter found and percent-decoded, then accepted
//! only as `http://host[:port][/path][?query]` (no TLS, no credentials), split into what the
//! client needs to connect and to ask.

use http::Uri;

use crate::error::Error;

/// A URL `/call` may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The URL as given (decoded), for the answer and the errors.
    pub(crate) url: String,
    /// The host to connect to: a name to resolve or an address (IPv6 without brackets).
    pub(crate) host: String,
    /// The port (80 when the URL has none).
    pub(crate) port: u16,
    /// The `Host` header: the URL's authority.
    pub(crate) authority: String,
    /// The request target: the path and the query (`/` when the URL has no path).
    pub(crate) path_and_query: String,
}

/// The value of the query parameter `name` in `query` (the part after `?`), percent-decoded
/// (`+` is a space); `None` when absent. The first one wins.
pub(crate) fn query_param(query: &str, name: &str) -> Option<Result<String, String>> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| percent_decode(value))
    })
}

/// `%XX` escapes and `+` decoded; an escape that is not two hex digits, or bytes that are not
/// UTF-8, are an error.
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad percent escape at byte {i} of {s:?}"))?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

/// Checks `url` is one `/call` may call: `http://`, a host, no credentials.
pub(crate) fn check_url(url: &str) -> Result<Target, Error> {
    let bad = |reason: &str| Error::BadUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => return Err(bad(&format!("scheme {other}: only http:// URLs"))),
        None => return Err(bad("no scheme: only http:// URLs")),
    }
    let authority = uri.authority().ok_or_else(|| bad("no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("credentials in a URL are not accepted"));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let path_and_query = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    Ok(Target {
        url: url.to_owned(),
        host: host.to_owned(),
        port: authority.port_u16().unwrap_or(80),
        authority: authority.as_str().to_owned(),
        path_and_query: if path_and_query.is_empty() {
            "/".to_owned()
        } else {
            path_and_query
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> String {
        match check_url(url) {
            Err(Error::BadUrl { url: u, reason }) => {
                assert_eq!(u, url);
                reason
            }
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn a_service_url_splits_into_host_port_and_request_target() {
        let t = check_url("http://back.demo:8080/call?url=http://x/").unwrap();
        assert_eq!(t.host, "back.demo");
        assert_eq!(t.port, 8080);
        assert_eq!(t.authority, "back.demo:8080");
        assert_eq!(t.path_and_query, "/call?url=http://x/");
        let t = check_url("http://back.demo").unwrap();
        assert_eq!((t.port, t.path_and_query.as_str()), (80, "/"));
        let t = check_url("http://[::1]:9/").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.authority.as_str()),
            ("::1", 9, "[::1]:9")
        );
    }

    #[test]
    fn only_plain_http_urls_with_a_host_and_no_credentials_pass() {
        assert!(reason("https://back.demo/").contains("only http://"));
        assert!(reason("ftp://back.demo/").contains("scheme ftp"));
        assert!(reason("back.demo:8080").contains("only http://"));
        assert!(reason("/relative").contains("only http://"));
        assert!(reason("http://user:pw@back.demo/").contains("credentials"));
        assert!(!reason("http://a b/").is_empty());
        assert!(!reason("").is_empty());
    }

    #[test]
    fn the_query_parameter_is_found_and_decoded() {
        let q = "format=text&url=http%3A%2F%2Fb.demo%3A80%2F%3Fa%3D1&url=second";
        assert_eq!(
            query_param(q, "url"),
            Some(Ok("http://b.demo:80/?a=1".into()))
        );
        assert_eq!(query_param(q, "format"), Some(Ok("text".into())));
        assert_eq!(query_param(q, "nothing"), None);
        assert_eq!(query_param("url", "url"), Some(Ok(String::new())));
        assert_eq!(query_param("url=a+b", "url"), Some(Ok("a b".into())));
        // Unencoded, as a shell user types it: the nested query is part of the value.
        assert_eq!(
            query_param("url=http://a/call?url=http://b/", "url"),
            Some(Ok("http://a/call?url=http://b/".into()))
        );
        assert!(query_param("url=%zz", "url").unwrap().is_err());
        assert!(query_param("url=%4", "url").unwrap().is_err());
        assert!(query_param("url=%ff", "url").unwrap().is_err());
    }
}
