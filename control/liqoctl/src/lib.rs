//! liqoctl, the command line of liqo-rs (also `kubectl liqo`): `generate peer-command` prints
//! what a different cluster runs to peer with this one; `peer out-of-band` stores the remote
//! token, writes the ForeignCluster and follows the peering stage by stage; `peer` and
//! `unpeer` switch the outgoing direction of an existing ForeignCluster; `peer in-band` and
//! `unpeer in-band`, holding both clusters' kubeconfigs, build the tunnel first and send the
//! authentication and API traffic through it ([`inband`]); `offload namespace` and
//! `unoffload namespace` write or delete a namespace's NamespaceOffloading and follow its
//! phase ([`offload`]; both unoffload and unpeer refuse while claims of class `liqo` hold
//! data on a provider, [`volumes`]); `status` shows the identity, the auth URL and the peerings;
//! `rotate-key` gives the gateway a new WireGuard key and follows the peers back
//! ([`rotate`]); `move volume` moves a `liqo` claim's data to a node of this cluster, verified
//! before the original goes ([`moving`]); `install` and `uninstall` with Helm and the chart built in ([`install`]);
//! `version` and `completion`.
//!
//! It owns the command line ([`cli`]), the decision of where a peering stands ([`stages`], pure)
//! and what is printed ([`render`], pure). It reads the identity, tokens and auth URL only
//! through `liqo_auth`, writes only ForeignClusters and remote token Secrets (in-band also the
//! NetworkConfig copies the replicator cannot make yet, and the IPAM's endpoint mappings of
//! the auth service and the proxy, and the NamespaceOffloadings of `offload`; `unpeer` removes
//! a ForeignCluster that never authenticated with what it made, [`unpeer`]; `rotate-key`
//! annotates the gateway's key Secret), and never prints
//! a token except in the peer command it is asked for, nor logs one.

pub mod cli;
pub mod client;
pub mod consts;
pub mod inband;
pub mod info;
pub mod install;
pub mod moving;
pub mod offload;
pub mod peer;
pub mod render;
pub mod rotate;
pub mod stages;
pub mod unpeer;
pub mod volumes;

use clap::CommandFactory;
use cli::{Cli, Command, Generate, Move, Offload, PeerMode, Unoffload, UnpeerMode};

pub use consts::FIELD_MANAGER;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No Kubernetes client.
    #[error("connecting to the cluster")]
    Client(#[from] client::ClientError),
    /// `generate peer-command`.
    #[error("failed to retrieve the peering information")]
    Generate(#[from] info::GenerateError),
    /// `peer`, `unpeer`.
    #[error(transparent)]
    Peer(#[from] peer::PeerError),
    /// `offload namespace`, `unoffload namespace`.
    #[error(transparent)]
    Offload(#[from] offload::OffloadError),
    /// `version`.
    #[error("reading the server's version")]
    Version(#[source] kube::Error),
    /// `rotate-key`.
    #[error(transparent)]
    Rotate(#[from] rotate::RotateError),
    /// `status -o`.
    #[error("printing the report")]
    Output(#[source] offload::decide::RenderError),
    /// `install`.
    #[error(transparent)]
    Install(#[from] install::InstallError),
    /// `uninstall`.
    #[error(transparent)]
    Uninstall(#[from] install::uninstall::UninstallError),
    /// `unoffload` and `unpeer` with claims holding data on a provider.
    #[error(transparent)]
    Volumes(#[from] volumes::VolumesError),
    /// `move volume`.
    #[error(transparent)]
    Move(#[from] moving::MoveError),
}

/// Runs the parsed command; `program` is how to name ourselves in printed commands
/// (`liqoctl` or `kubectl liqo`).
pub async fn run(cli: Cli, program: &str) -> Result<(), Error> {
    let ns = cli.namespace.as_str();
    let connect = || client::client(cli.kubeconfig.as_deref(), cli.context.as_deref());
    match &cli.command {
        Command::Completion { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(
                *shell,
                &mut cmd,
                program.replace(' ', "-"),
                &mut std::io::stdout(),
            );
        }
        Command::Version { client } => {
            println!("Client version: {}", env!("CARGO_PKG_VERSION"));
            if !client {
                let v = info::server_version(&connect().await?)
                    .await
                    .map_err(Error::Version)?;
                println!("Kubernetes API server version: {v}");
            }
        }
        Command::Generate(Generate::PeerCommand { only_command }) => {
            let command = info::peer_command(&connect().await?, ns, program).await?;
            print!("{}", render::peer_command_output(&command, *only_command));
        }
        Command::Offload(Offload::Namespace(args)) => {
            let obj = offload::decide::namespace_offloading(
                args.name.as_str(),
                args.namespace_mapping_strategy,
                args.pod_offloading_strategy,
                &args.selectors,
            );
            if let Some(format) = args.output {
                let text =
                    offload::decide::render(&obj, format).map_err(offload::OffloadError::from)?;
                print!("{text}");
                return Ok(());
            }
            offload::offload(&connect().await?, &obj, args.timeout).await?;
        }
        Command::Unoffload(Unoffload::Namespace {
            name,
            timeout,
            delete_remote_volumes,
        }) => {
            let client = connect().await?;
            volumes::guard(
                &client,
                volumes::Scope::Namespace(name.as_str()),
                *delete_remote_volumes,
                &format!("unoffload namespace {name}"),
                program,
            )
            .await?;
            offload::unoffload(&client, name.as_str(), *timeout).await?;
        }
        Command::Move(Move::Volume(args)) => {
            let request = moving::Request {
                namespace: ns,
                claim: args.claim.as_str(),
                node: args.node.as_str(),
                liqo_namespace: args.liqo_namespace.as_str(),
                image: args.image.as_deref(),
                timeout: args.timeout,
            };
            moving::move_volume(&connect().await?, &request).await?;
        }
        Command::Install(args) => {
            let helm = install::helm::Helm::find(cli.kubeconfig.as_deref(), cli.context.as_deref());
            // Only the values file can be made without Helm.
            let helm = match helm {
                Ok(h) => Some(h),
                Err(_) if args.only_output_values => None,
                Err(e) => return Err(install::InstallError::from(e).into()),
            };
            install::install(&connect().await?, helm.as_ref(), ns, args).await?;
        }
        Command::Uninstall(args) => {
            let helm = install::helm::Helm::find(cli.kubeconfig.as_deref(), cli.context.as_deref())
                .map_err(install::InstallError::from)?;
            install::uninstall::uninstall(&connect().await?, &helm, ns, args).await?;
        }
        Command::RotateKey { timeout } => {
            rotate::rotate(&connect().await?, ns, *timeout).await?;
        }
        Command::Status { output } => {
            let config = client::config(cli.kubeconfig.as_deref(), cli.context.as_deref()).await?;
            let server = config.cluster_url.to_string();
            let client = kube::Client::try_from(config).map_err(client::ClientError::Build)?;
            let mut report = info::status(&client, ns).await;
            report.api_server = Some(server);
            match output {
                None => print!("{}", render::status(&report)),
                Some(format) => {
                    let text = offload::decide::render(&render::status_value(&report), *format)
                        .map_err(Error::Output)?;
                    print!("{text}");
                }
            }
        }
        Command::Peer(args) => {
            if let Some(PeerMode::InBand(ib)) = &args.mode {
                let (local, remote) = in_band_sides(&cli, &ib.remote).await?;
                inband::run::peer(local, remote, ib.bidirectional, ib.timeout).await?;
                return Ok(());
            }
            let client = connect().await?;
            match (&args.mode, &args.name) {
                (Some(PeerMode::OutOfBand(oob)), _) => {
                    let oob = peer::OutOfBand {
                        name: &oob.name,
                        auth_url: &oob.auth_url,
                        cluster_id: &oob.cluster_id,
                        token: &oob.auth_token,
                        timeout: oob.timeout,
                    };
                    peer::out_of_band(&client, ns, &oob).await?;
                }
                (None, Some(name)) => peer::enable(&client, name.as_str(), args.timeout).await?,
                (Some(PeerMode::InBand(_)), _) => unreachable!("handled above"),
                (None, None) => unreachable!("clap requires a name without a subcommand"),
            }
        }
        Command::Unpeer(args) => {
            if let Some(UnpeerMode::InBand {
                remote,
                timeout,
                delete_remote_volumes,
            }) = &args.mode
            {
                let (local, remote) = in_band_sides(&cli, remote).await?;
                inband::run::unpeer(local, remote, *timeout, *delete_remote_volumes, program)
                    .await?;
                return Ok(());
            }
            let client = connect().await?;
            let (name, timeout, delete_remote_volumes) = match (&args.mode, &args.name) {
                (
                    Some(UnpeerMode::OutOfBand {
                        name,
                        timeout,
                        delete_remote_volumes,
                    }),
                    _,
                ) => (name, *timeout, *delete_remote_volumes),
                (None, Some(name)) => (name, args.timeout, args.delete_remote_volumes),
                (Some(UnpeerMode::InBand { .. }), _) => unreachable!("handled above"),
                (None, None) => unreachable!("clap requires a name without a subcommand"),
            };
            volumes::guard(
                &client,
                volumes::Scope::Peer(name.as_str()),
                delete_remote_volumes,
                &format!("unpeer {name}"),
                program,
            )
            .await?;
            peer::disable(&client, ns, name.as_str(), timeout).await?;
        }
    }
    Ok(())
}

/// Both sides of an in-band command: the global flags' cluster and the `--remote-*` one.
async fn in_band_sides(
    cli: &Cli,
    remote: &cli::Remote,
) -> Result<(inband::run::Side, inband::run::Side), Error> {
    let local = client::client(cli.kubeconfig.as_deref(), cli.context.as_deref()).await?;
    let remote_kubeconfig = remote
        .remote_kubeconfig
        .as_deref()
        .or(cli.kubeconfig.as_deref());
    let remote_client = client::client(remote_kubeconfig, remote.remote_context.as_deref()).await?;
    Ok((
        inband::run::Side {
            label: "local",
            client: local,
            namespace: cli.namespace.to_string(),
            ipam_address: remote.ipam_address.clone(),
        },
        inband::run::Side {
            label: "remote",
            client: remote_client,
            namespace: remote.remote_namespace.to_string(),
            ipam_address: remote.remote_ipam_address.clone(),
        },
    ))
}
