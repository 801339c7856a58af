use clap::{Parser, error::ErrorKind};

use super::*;

const ID: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";
const URL: &str = "https://172.18.0.2:31234";

fn token() -> String {
    "0123456789abcdef".repeat(8)
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("liqoctl").chain(args.iter().copied()))
}

fn oob(name: &str, url: &str, id: &str, token: &str) -> Result<Cli, clap::Error> {
    parse(&[
        "peer",
        "out-of-band",
        name,
        "--auth-url",
        url,
        "--cluster-id",
        id,
        "--auth-token",
        token,
    ])
}

#[test]
fn clap_definition_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

#[test]
fn peer_out_of_band_parses_with_defaults() {
    let cli = oob("milan", URL, ID, &token()).unwrap();
    assert_eq!(cli.namespace.as_str(), "liqo");
    let Command::Peer(PeerArgs {
        mode: Some(PeerMode::OutOfBand(o)),
        ..
    }) = cli.command
    else {
        panic!("not peer out-of-band: {:?}", cli.command)
    };
    assert_eq!(o.name.as_str(), "milan");
    assert_eq!(o.auth_url.as_str(), URL);
    assert_eq!(o.cluster_id.as_str(), ID);
    assert_eq!(o.auth_token.expose(), token());
    assert_eq!(o.timeout, Duration::from_secs(120));
}

#[test]
fn oob_alias_global_flags_and_timeout() {
    let t = token();
    let cli = parse(&[
        "--kubeconfig",
        "/k",
        "--context",
        "rome",
        "peer",
        "oob",
        "milan",
        "--auth-url",
        URL,
        "--cluster-id",
        ID,
        "--auth-token",
        &t,
        "--timeout",
        "3s",
        "-n",
        "liqo-x",
        "-vv",
    ])
    .unwrap();
    assert_eq!(cli.kubeconfig.as_deref(), Some(std::path::Path::new("/k")));
    assert_eq!(cli.context.as_deref(), Some("rome"));
    assert_eq!(cli.namespace.as_str(), "liqo-x");
    assert_eq!(cli.verbose, 2);
    let Command::Peer(PeerArgs {
        mode: Some(PeerMode::OutOfBand(o)),
        ..
    }) = cli.command
    else {
        panic!()
    };
    assert_eq!(o.timeout, Duration::from_secs(3));
}

/// Each bad value is refused while parsing, with an error naming the flag and the value.
#[test]
fn bad_values_are_named() {
    let t = token();
    let cases: [(&[&str], &str, &str); 6] = [
        (&["Milan", URL, ID, &t], "Milan", "<NAME>"),
        (&["milan", "ftp://x.y", ID, &t], "ftp://x.y", "--auth-url"),
        (&["milan", "https://", ID, &t], "https://", "--auth-url"),
        (
            &["milan", "https://x.y:99999", ID, &t],
            "99999",
            "--auth-url",
        ),
        (
            &["milan", URL, "Not_An_Id", &t],
            "Not_An_Id",
            "--cluster-id",
        ),
        (
            &["milan", "https://x.y/path", ID, &t],
            "/path",
            "--auth-url",
        ),
    ];
    for (args, value, flag) in cases {
        let e = oob(args[0], args[1], args[2], args[3]).unwrap_err();
        let text = e.to_string();
        assert_eq!(e.kind(), ErrorKind::ValueValidation, "{text}");
        assert!(
            text.contains(value) && text.contains(flag),
            "{args:?}: {text}"
        );
        assert_ne!(e.exit_code(), 0);
    }
}

#[test]
fn a_bad_token_is_refused_without_echoing_it() {
    for bad in [
        "abc".to_owned(),
        "0123456789ABCDEF".repeat(8),
        format!("{}0", token()),
        String::new(),
    ] {
        let e = oob("milan", URL, ID, &bad).unwrap_err();
        let text = e.to_string();
        assert_eq!(e.kind(), ErrorKind::ValueValidation, "{text}");
        assert!(text.contains("--auth-token"), "{text}");
        assert!(
            bad.is_empty() || !text.contains(&bad),
            "token echoed: {text}"
        );
    }
}

#[test]
fn missing_flags_are_refused() {
    let e = parse(&["peer", "out-of-band", "milan", "--auth-url", URL]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument);
    assert!(e.to_string().contains("--cluster-id"));
    let e = parse(&["peer"]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument, "{e}");
    let e = parse(&["unpeer"]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument, "{e}");
}

#[test]
fn timeouts() {
    assert_eq!(parse_timeout("120s"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_timeout("1m30s"), Ok(Duration::from_secs(90)));
    assert!(parse_timeout("0s").is_err());
    assert!(parse_timeout("soon").is_err());
    let e = parse(&["unpeer", "milan", "--timeout", "soon"]).unwrap_err();
    assert!(e.to_string().contains("soon"), "{e}");
}

#[test]
fn peer_and_unpeer_forms() {
    let cli = parse(&["peer", "consumer", "--timeout", "10s"]).unwrap();
    let Command::Peer(PeerArgs {
        mode: None,
        name: Some(n),
        timeout,
    }) = cli.command
    else {
        panic!()
    };
    assert_eq!((n.as_str(), timeout), ("consumer", Duration::from_secs(10)));
    let cli = parse(&["unpeer", "out-of-band", "milan"]).unwrap();
    let Command::Unpeer(UnpeerArgs {
        mode:
            Some(UnpeerMode::OutOfBand {
                name,
                timeout,
                delete_remote_volumes,
            }),
        ..
    }) = cli.command
    else {
        panic!()
    };
    assert_eq!(
        (name.as_str(), timeout, delete_remote_volumes),
        ("milan", Duration::from_secs(120), false)
    );
    let cli = parse(&["unpeer", "milan"]).unwrap();
    assert!(matches!(
        cli.command,
        Command::Unpeer(UnpeerArgs {
            mode: None,
            name: Some(_),
            delete_remote_volumes: false,
            ..
        })
    ));
    for argv in [
        &["unpeer", "milan", "--delete-remote-volumes"][..],
        &["unpeer", "out-of-band", "milan", "--delete-remote-volumes"],
    ] {
        let cli = parse(argv).unwrap();
        let Command::Unpeer(args) = cli.command else {
            panic!()
        };
        let asked = match args.mode {
            Some(UnpeerMode::OutOfBand {
                delete_remote_volumes,
                ..
            }) => delete_remote_volumes,
            _ => args.delete_remote_volumes,
        };
        assert!(asked, "{argv:?}");
    }
    assert!(parse(&["unoffload", "namespace", "demo", "--delete-remote-volumes"]).is_ok());
    assert!(parse(&["unpeer", "Bad_Name"]).is_err());
}

#[test]
fn other_commands() {
    assert!(matches!(
        parse(&["generate", "peer-command", "--only-command"])
            .unwrap()
            .command,
        Command::Generate(Generate::PeerCommand { only_command: true })
    ));
    assert!(matches!(
        parse(&["status"]).unwrap().command,
        Command::Status { output: None }
    ));
    assert!(matches!(
        parse(&["info", "-o", "json"]).unwrap().command,
        Command::Status {
            output: Some(OutputFormat::Json)
        }
    ));
    assert!(parse(&["status", "-o", "xml"]).is_err());
    assert!(matches!(
        parse(&[
            "install",
            "kubeadm",
            "--cluster-name",
            "rome",
            "--version",
            "0.1.0",
            "--reserved-subnets",
            "10.1.0.0/16,10.2.0.0/16"
        ])
        .unwrap()
        .command,
        Command::Install(a) if a.provider == crate::install::args::Provider::Kubeadm
            && a.version.as_deref() == Some("0.1.0")
            && a.reserved_subnets.len() == 2
    ));
    assert!(matches!(
        parse(&["version", "--client"]).unwrap().command,
        Command::Version { client: true }
    ));
    assert!(matches!(
        parse(&["completion", "zsh"]).unwrap().command,
        Command::Completion { shell: Shell::Zsh }
    ));
    assert!(parse(&["completion", "tcsh"]).is_err());
    assert!(parse(&["-n", "Bad_Ns", "status"]).is_err());
}

#[test]
fn auth_urls() {
    for ok in [
        "https://127.0.0.1:8443",
        "https://auth.example.com",
        "http://10.0.0.1:80",
        "https://[fd00::1]:443",
        "https://auth.example.com/",
    ] {
        ok.parse::<AuthUrl>()
            .unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    assert_eq!(
        "https://a.b/".parse::<AuthUrl>().unwrap().as_str(),
        "https://a.b"
    );
    for (bad, why) in [
        ("auth.example.com", InvalidAuthUrl::Scheme),
        ("https://", InvalidAuthUrl::NoHost),
        ("https://:443", InvalidAuthUrl::NoHost),
        ("https://a b", InvalidAuthUrl::HostChar(' ')),
        ("https://a.b:0", InvalidAuthUrl::Port("0".into())),
        ("https://a.b:x", InvalidAuthUrl::Port("x".into())),
        ("https://a.b/x", InvalidAuthUrl::Trailing("/x".into())),
        ("https://[zz]:1", InvalidAuthUrl::HostChar('[')),
    ] {
        assert_eq!(bad.parse::<AuthUrl>(), Err(why), "{bad}");
    }
}

#[test]
fn plugin_name() {
    use std::ffi::OsStr;
    assert_eq!(
        program_name(Some(OsStr::new("/usr/bin/kubectl-liqo"))),
        "kubectl liqo"
    );
    assert_eq!(
        program_name(Some(OsStr::new("kubectl-liqo.exe"))),
        "kubectl liqo"
    );
    assert_eq!(program_name(Some(OsStr::new("./liqoctl"))), "liqoctl");
    assert_eq!(program_name(None), "liqoctl");
}

#[test]
fn peer_and_unpeer_in_band() {
    let cli = parse(&[
        "peer",
        "in-band",
        "--kubeconfig",
        "/k/rome",
        "--remote-kubeconfig",
        "/k/milan",
        "--ipam-address",
        "http://10.0.0.5:6000",
        "--remote-ipam-address",
        "http://10.0.1.5:6000",
        "--bidirectional",
        "--timeout",
        "3m",
    ])
    .unwrap();
    assert_eq!(
        cli.kubeconfig.as_deref(),
        Some(std::path::Path::new("/k/rome"))
    );
    let Command::Peer(PeerArgs {
        mode: Some(PeerMode::InBand(ib)),
        ..
    }) = cli.command
    else {
        panic!("{:?}", cli.command)
    };
    assert!(ib.bidirectional);
    assert_eq!(ib.timeout, Duration::from_secs(180));
    assert_eq!(ib.remote.remote_namespace.as_str(), "liqo");
    assert_eq!(ib.remote.ipam_address, "http://10.0.0.5:6000");
    assert_eq!(ib.remote.remote_ipam_address, "http://10.0.1.5:6000");

    let cli = parse(&[
        "unpeer",
        "ib",
        "--remote-context",
        "milan",
        "--remote-namespace",
        "liqo-system",
        "--ipam-address",
        "http://a:1",
        "--remote-ipam-address",
        "https://b:2",
    ])
    .unwrap();
    let Command::Unpeer(UnpeerArgs {
        mode: Some(UnpeerMode::InBand {
            remote, timeout, ..
        }),
        ..
    }) = cli.command
    else {
        panic!("{:?}", cli.command)
    };
    assert_eq!(remote.remote_context.as_deref(), Some("milan"));
    assert_eq!(remote.remote_namespace.as_str(), "liqo-system");
    assert_eq!(timeout, Duration::from_secs(120));
}

#[test]
fn in_band_needs_both_ipams_and_good_addresses() {
    let base = ["peer", "in-band", "--remote-context", "milan"];
    let e = parse(&base).unwrap_err().to_string();
    assert!(
        e.contains("--ipam-address") && e.contains("--remote-ipam-address"),
        "{e}"
    );
    for (bad, why) in [
        ("10.0.0.5:6000", "does not start with https://"),
        ("http://10.0.0.5", "has no port"),
        ("http://10.0.0.5:6000/x", "something after the host"),
    ] {
        let mut args = base.to_vec();
        args.extend(["--ipam-address", bad, "--remote-ipam-address", "http://b:2"]);
        let e = parse(&args).unwrap_err().to_string();
        assert!(
            e.contains("--ipam-address") && e.contains(why),
            "{bad}: {e}"
        );
    }
}
