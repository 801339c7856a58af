//! The `liqo-demo` binary over loopback: two instances (a front in "rome", a back in "milan"),
//! each started on a free port and polled until `/healthz` answers. `/` names the pod and the
//! client address the server saw; `/call` crosses from one to the other; a bad URL is a 400, a
//! refused one a 502, both naming the URL; an unknown path a 404; SIGTERM stops it cleanly.
//! Without a data directory, `/append` and `/log` are unknown paths. The helpers are in
//! `common/`; the data directory's tests in `data.rs`.

mod common;
// The database-like mode (`--data-dir`), in this test binary.
#[path = "demo/data.rs"]
mod data;

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::Command,
    time::{Duration, Instant},
};

use common::{free_port, get, json, request, start, try_get};

#[test]
fn version_names_the_program() {
    let out = Command::new(env!("CARGO_BIN_EXE_liqo-demo"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = String::from_utf8(out.stdout).unwrap();
    assert_eq!(v.trim(), format!("liqo-demo {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn answers_who_served_calls_across_and_reports_bad_calls() {
    let front = start("front-1", "rome");
    let back = start("back-1", "milan");

    // `/`: the pod's fields, the client as the server saw it (this connection), the count.
    let (status, ctype, body, local) = get(front.addr, "/");
    assert_eq!(
        (status, ctype.as_str()),
        (200, "application/json"),
        "{body}"
    );
    let v = json(&body);
    assert_eq!(v["pod"], "front-1");
    assert_eq!(v["namespace"], "demo");
    assert_eq!(v["node"], "rome-worker");
    assert_eq!(v["cluster"], "rome");
    assert_eq!(v["client"], local.to_string());
    assert!(local.to_string().starts_with("127.0.0.1:"));
    assert_eq!(v["served"], 1, "probes are not counted: {body}");
    let (_, _, body, _) = get(front.addr, "/");
    assert_eq!(json(&body)["served"], 2);

    // The one line of text, by parameter or by Accept.
    let (status, ctype, line, local) = get(front.addr, "/?format=text");
    assert_eq!((status, ctype.as_str()), (200, "text/plain; charset=utf-8"));
    assert_eq!(
        line,
        format!(
            "pod=front-1 namespace=demo node=rome-worker cluster=rome client={local} served=3\n"
        )
    );
    let (_, ctype, line, _) = try_get(front.addr, "/", Some("text/plain")).unwrap();
    assert!(
        ctype.starts_with("text/plain") && line.starts_with("pod=front-1 "),
        "{line}"
    );

    // `/call`: rome calls milan; the back saw the front's outbound connection.
    let url = format!("http://{}/", back.addr);
    let (status, _, body, local) = get(front.addr, &format!("/call?url={url}"));
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["via"]["cluster"], "rome");
    assert_eq!(v["via"]["pod"], "front-1");
    assert_eq!(v["via"]["client"], local.to_string());
    assert_eq!(v["url"], url);
    assert_eq!(v["status"], 200);
    assert_eq!(v["answer"]["cluster"], "milan");
    assert_eq!(v["answer"]["pod"], "back-1");
    assert_eq!(v["answer"]["node"], "milan-worker");
    let back_client = v["answer"]["client"].as_str().unwrap();
    assert!(back_client.starts_with("127.0.0.1:"), "{back_client}");
    assert_ne!(back_client, local.to_string());

    // And back again, the URL percent-encoded and nested: milan → rome → milan.
    let nested = format!("http://{}/call?url=http://{}/", front.addr, back.addr);
    let encoded = nested
        .replace(':', "%3A")
        .replace('/', "%2F")
        .replace('?', "%3F");
    let (status, _, body, _) = get(back.addr, &format!("/call?url={encoded}"));
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["via"]["cluster"], "milan");
    assert_eq!(v["answer"]["via"]["cluster"], "rome");
    assert_eq!(v["answer"]["answer"]["cluster"], "milan");

    // A bad URL: 400 naming it; a refused one: 502 naming it and the error.
    let (status, _, body, _) = get(front.addr, "/call?url=ftp://back.demo/");
    assert_eq!(status, 400, "{body}");
    let error = json(&body)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("\"ftp://back.demo/\"") && error.contains("http://"),
        "{error}"
    );
    let (status, _, body, _) = get(front.addr, "/call");
    assert_eq!(status, 400, "{body}");
    let refused = format!("http://127.0.0.1:{}/", free_port());
    let (status, _, body, _) = get(front.addr, &format!("/call?url={refused}"));
    assert_eq!(status, 502, "{body}");
    let v = json(&body);
    assert_eq!(v["url"], refused);
    let error = v["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("calling {refused}: cannot connect: ")),
        "{error}"
    );
    assert!(error.to_lowercase().contains("refused"), "{error}");

    // Unknown path (`/append` and `/log` too without a data directory), other method.
    assert_eq!(get(front.addr, "/nothing").0, 404);
    assert_eq!(get(front.addr, "/log").0, 404);
    let a = request(front.addr, "POST", "/append?entry=x");
    assert_eq!((a.status, a.allow.as_str()), (404, ""), "{}", a.body);
    assert!(a.body.contains("with --data-dir"), "{}", a.body);
    let mut s = TcpStream::connect(front.addr).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 405 "), "{raw}");
    assert!(
        raw.to_ascii_lowercase().contains("\r\nallow: get\r\n"),
        "{raw}"
    );
}

#[test]
fn sigterm_stops_it_cleanly() {
    let mut demo = start("front-1", "rome");
    let pid = demo.child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "liqo-demo still running 15 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit after SIGTERM: {status}");
    assert!(
        TcpStream::connect(demo.addr).is_err(),
        "still listening after it stopped"
    );
}
