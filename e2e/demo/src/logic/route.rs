//! The request → route decision: which answer a method, a path, a query and an `Accept` header
//! ask for, with `/call`'s URL already checked (no I/O).

use http::{Method, Uri};

use super::target::{Target, check_url, query_param};
use crate::error::Error;

/// How `/` answers: JSON (the default), or one line of text (`?format=text`, or an `Accept`
/// naming `text/plain` and not `application/json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Text,
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `GET /`: who served it.
    Hello(Format),
    /// `GET /call?url=…` with a URL that passed the check: call it.
    Call(Target),
    /// `GET /call` whose URL is missing or bad: 400.
    BadCall(String),
    /// `GET /healthz`: 200 `ok`.
    Health,
    /// Another method on a known path: 405.
    MethodNotAllowed,
    /// Any other path: 404.
    NotFound,
}

impl Route {
    /// Whether this request is counted in `served` (the answers carrying the pod's identity;
    /// probes and errors are not).
    pub(crate) fn counts(&self) -> bool {
        matches!(self, Route::Hello(_) | Route::Call(_))
    }
}

/// The route of a request.
pub(crate) fn route(method: &Method, uri: &Uri, accept: Option<&str>) -> Route {
    let query = uri.query().unwrap_or("");
    let known = matches!(uri.path(), "/" | "/call" | "/healthz");
    if !known {
        return Route::NotFound;
    }
    if method != Method::GET {
        return Route::MethodNotAllowed;
    }
    match uri.path() {
        "/" => Route::Hello(format(query, accept)),
        "/call" => match query_param(query, "url") {
            None => Route::BadCall(Error::MissingUrl.to_string()),
            Some(Ok(url)) if url.is_empty() => Route::BadCall(Error::MissingUrl.to_string()),
            Some(Err(reason)) => Route::BadCall(
                Error::BadUrl {
                    url: query.to_owned(),
                    reason,
                }
                .to_string(),
            ),
            Some(Ok(url)) => match check_url(&url) {
                Ok(target) => Route::Call(target),
                Err(e) => Route::BadCall(e.to_string()),
            },
        },
        _ => Route::Health,
    }
}

/// The answer's format: the `format` parameter first, then the `Accept` header.
fn format(query: &str, accept: Option<&str>) -> Format {
    match query_param(query, "format") {
        Some(Ok(f)) if f == "text" => return Format::Text,
        Some(Ok(f)) if f == "json" => return Format::Json,
        _ => {}
    }
    match accept {
        Some(a) if a.contains("text/plain") && !a.contains("application/json") => Format::Text,
        _ => Format::Json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str, accept: Option<&str>) -> Route {
        route(&Method::GET, &uri.parse().unwrap(), accept)
    }

    #[test]
    fn root_answers_json_unless_text_is_asked_for() {
        assert_eq!(get("/", None), Route::Hello(Format::Json));
        assert_eq!(get("/", Some("*/*")), Route::Hello(Format::Json));
        assert_eq!(get("/?format=text", None), Route::Hello(Format::Text));
        assert_eq!(get("/", Some("text/plain")), Route::Hello(Format::Text));
        assert_eq!(
            get("/", Some("text/plain, application/json")),
            Route::Hello(Format::Json)
        );
        assert_eq!(
            get("/?format=json", Some("text/plain")),
            Route::Hello(Format::Json)
        );
        assert!(get("/", None).counts());
    }

    #[test]
    fn call_checks_its_url_before_any_io() {
        let Route::Call(t) = get("/call?url=http://back.demo:8080/", None) else {
            panic!("not a call");
        };
        assert_eq!((t.host.as_str(), t.port), ("back.demo", 8080));
        assert!(get("/call?url=http://back.demo:8080/", None).counts());
        for (uri, expect) in [
            ("/call", "needs a url parameter"),
            ("/call?url=", "needs a url parameter"),
            (
                "/call?url=https://back.demo/",
                "bad url \"https://back.demo/\"",
            ),
            ("/call?url=%zz", "bad percent escape"),
        ] {
            match get(uri, None) {
                Route::BadCall(e) => assert!(e.contains(expect), "{uri}: {e}"),
                other => panic!("{uri}: {other:?}"),
            }
        }
        assert!(!get("/call", None).counts());
    }

    #[test]
    fn probes_other_methods_and_unknown_paths() {
        assert_eq!(get("/healthz", None), Route::Health);
        assert!(!Route::Health.counts());
        assert_eq!(get("/nothing", None), Route::NotFound);
        assert_eq!(get("/healthz/", None), Route::NotFound);
        let post = route(&Method::POST, &"/".parse().unwrap(), None);
        assert_eq!(post, Route::MethodNotAllowed);
        let post = route(&Method::POST, &"/elsewhere".parse().unwrap(), None);
        assert_eq!(post, Route::NotFound);
    }
}
