//! The keys and configuration files of a run: one key pair per side, used by every tunnel, in
//! the run directory (mode 0600).

use std::{
    fs::{self, OpenOptions},
    io::Write as _,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use gateway::{
    config::{File as GatewayFile, PeerFile},
    keys::PrivateKey,
};

use super::{
    BenchError, TUNNEL_MTU,
    bed::{self, Bed},
    names::remove_file,
    options::fail,
};

/// UDP port of the WireGuard daemons.
const WG_PORT: u16 = 51820;
/// UDP port of our gateway.
const OURS_PORT: u16 = 51840;

/// `A` or `B`.
pub(crate) fn side(side_a: bool) -> char {
    if side_a { 'A' } else { 'B' }
}

/// The keys and configuration files of a run (one key pair per side, used by every tunnel).
pub(crate) struct Keys {
    dir: PathBuf,
    /// Our gateway's configuration of side A and B as first written.
    ours: [GatewayFile; 2],
}

/// Writes `text` to `path` (mode 0600) through a temporary file renamed over it, so that a
/// daemon watching `path` never reads half of it.
fn write_secret(path: &Path, text: &str) -> Result<(), BenchError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| {
            remove_file(&tmp);
            fail(format!("writing {}", path.display()), e.to_string())
        })
}

impl Keys {
    /// Creates both keys and the configurations of every tunnel in the run directory.
    pub(crate) fn create(bed: &Bed) -> Result<Keys, BenchError> {
        let dir = bed.names.run_dir();
        let keys: Vec<PrivateKey> = [true, false]
            .iter()
            .map(|a| {
                let path = dir.join(format!("key{}", side(*a)));
                PrivateKey::load_or_create(&path)
                    .map_err(|e| BenchError::step(format!("creating {}", path.display()), &e))
            })
            .collect::<Result<_, _>>()?;
        let mut ours_files = Vec::with_capacity(2);
        for side_a in [true, false] {
            let (me, peer) = if side_a { (0, 1) } else { (1, 0) };
            let (local, remote, endpoint, peer_tun) = if side_a {
                (
                    bed::POD_A_NET,
                    bed::POD_B_NET,
                    bed::GW_B_UNDERLAY,
                    bed::TUN_B,
                )
            } else {
                (
                    bed::POD_B_NET,
                    bed::POD_A_NET,
                    bed::GW_A_UNDERLAY,
                    bed::TUN_A,
                )
            };
            let wg = format!(
                "[Interface]\nPrivateKey = {}\nListenPort = {WG_PORT}\n\n[Peer]\nPublicKey = {}\n\
                 Endpoint = {endpoint}:{WG_PORT}\nAllowedIPs = {peer_tun}/32, {remote}\n",
                keys[me].to_base64(),
                keys[peer].public()
            );
            write_secret(&dir.join(format!("wg{}.conf", side(side_a))), &wg)?;
            let ours = GatewayFile {
                namespace: Some(bed.names.gateway_netns(side_a).to_string()),
                listen_port: Some(OURS_PORT),
                private_key_file: Some(
                    dir.join(format!("key{}", side(side_a)))
                        .display()
                        .to_string(),
                ),
                mtu: Some(TUNNEL_MTU),
                local_pod_cidr: Some(cidr(local)?),
                peers: vec![PeerFile {
                    id: format!("side-{}", side(!side_a).to_ascii_lowercase())
                        .parse()
                        .map_err(|e| BenchError::step("naming the bench peer", &e))?,
                    public_key: keys[peer].public(),
                    endpoint: Some(
                        format!("{endpoint}:{OURS_PORT}")
                            .parse()
                            .map_err(|e| BenchError::step("the bench endpoint", &e))?,
                    ),
                    keepalive: None,
                    remote_pod_cidr: cidr(remote)?,
                    remote_external_cidr: None,
                    // Identity views: no remapping.
                    local_pod_cidr_at_peer: cidr(local)?,
                    local_external_cidr_at_peer: None,
                }],
                ..GatewayFile::default()
            };
            ours_files.push(ours);
        }
        let ours = ours_files
            .try_into()
            .unwrap_or_else(|_| unreachable!("one file per side"));
        let k = Keys { dir, ours };
        for side_a in [true, false] {
            k.write_ours(side_a, k.ours_file(side_a))?;
        }
        Ok(k)
    }

    /// Our gateway's configuration of side A or B as first written: one peer, the other side.
    pub(crate) fn ours_file(&self, side_a: bool) -> &GatewayFile {
        &self.ours[usize::from(!side_a)]
    }

    /// Writes `file` as our gateway's configuration of side A or B; returns the digest of the
    /// text written (the one its status reports once it runs it).
    pub(crate) fn write_ours(
        &self,
        side_a: bool,
        file: &GatewayFile,
    ) -> Result<String, BenchError> {
        let yaml = serde_saphyr::to_string(file)
            .map_err(|e| BenchError::step("encoding the gateway configuration", &e))?;
        write_secret(&self.ours_conf(side_a), &yaml)?;
        Ok(liqo_daemon::digest(&yaml))
    }

    pub(crate) fn wg_conf(&self, side_a: bool) -> PathBuf {
        self.dir.join(format!("wg{}.conf", side(side_a)))
    }

    pub(crate) fn ours_conf(&self, side_a: bool) -> PathBuf {
        self.dir.join(format!("ours{}.yaml", side(side_a)))
    }
}

fn cidr(s: &str) -> Result<liqo_types::Cidr, BenchError> {
    s.parse()
        .map_err(|e| BenchError::step(format!("the bench range {s}"), &e))
}
