//! Applying, listing and deleting our table, through `nft -j` (driven by the `nftables` crate)
//! run inside the target namespace.

use nftables::helper::{self, DEFAULT_NFT, NftablesError};
use serde_json::Value;

use super::{
    Family, Ident, Ruleset,
    build::{self, BuildError},
};
use crate::netns::{self, Netns};

/// What went wrong applying or reading nftables state.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ruleset is inconsistent; nothing was sent to the kernel.
    #[error("invalid ruleset")]
    Build(#[from] BuildError),
    /// `nft` refused the batch or could not run; the kernel state is unchanged.
    #[error("{op} table {family} {table}")]
    Nft {
        /// What was being done.
        op: &'static str,
        /// The table's family.
        family: Family,
        /// The table.
        table: Ident,
        /// The cause, with nft's own message.
        #[source]
        source: Box<NftablesError>,
    },
    /// `nft` printed something that is not the JSON we expect.
    #[error("unexpected output of nft: {0}")]
    Output(String),
    /// The namespace could not be entered.
    #[error(transparent)]
    Netns(#[from] netns::Error),
}

fn in_ns<T: Send>(ns: Option<&Netns>, f: impl FnOnce() -> T + Send) -> Result<T, Error> {
    match ns {
        Some(ns) => Ok(ns.run(f)?),
        None => Ok(f()),
    }
}

fn run_batch(ns: Option<&Netns>, batch: &Value) -> Result<(), NftablesError> {
    let payload = batch.to_string();
    in_ns(ns, || helper::apply_ruleset_raw(&payload, DEFAULT_NFT, helper::DEFAULT_ARGS).map(drop))
        .unwrap_or_else(|e| Err(NftablesError::NftExecution { program: "nft".into(), inner: std::io::Error::other(e.to_string()) }))
}

/// Replaces our whole table with `rs` in one transaction, in `ns` (or the caller's namespace).
/// On error the previous table, if any, is untouched.
pub fn apply(ns: Option<&Netns>, rs: &Ruleset) -> Result<(), Error> {
    let batch = build::batch(rs)?;
    run_batch(ns, &batch).map_err(|source| Error::Nft {
        op: "applying",
        family: rs.family,
        table: rs.table.clone(),
        source: Box::new(source),
    })
}

/// Deletes the table if it exists.
pub fn delete(ns: Option<&Netns>, family: Family, table: &Ident) -> Result<(), Error> {
    run_batch(ns, &build::delete_batch(family, table)).map_err(|source| Error::Nft {
        op: "deleting",
        family,
        table: table.clone(),
        source: Box::new(source),
    })
}

/// The table as `nft -j list table` prints it (the objects without `metainfo`), or `None` if it
/// does not exist.
pub fn list(ns: Option<&Netns>, family: Family, table: &Ident) -> Result<Option<Vec<Value>>, Error> {
    let exists = tables(ns)?.iter().any(|(f, t)| *f == family && t == table);
    if !exists {
        return Ok(None);
    }
    let args = ["list", "table", family.as_str(), table.as_str()];
    let out = in_ns(ns, || helper::get_current_ruleset_raw(DEFAULT_NFT, args))?.map_err(|source| Error::Nft {
        op: "listing",
        family,
        table: table.clone(),
        source: Box::new(source),
    })?;
    Ok(Some(objects(&out)?))
}

/// Every table in `ns`, as `(family, name)`; tables of other families (arp, bridge, netdev)
/// are left out.
pub fn tables(ns: Option<&Netns>) -> Result<Vec<(Family, Ident)>, Error> {
    let out = in_ns(ns, || helper::get_current_ruleset_raw(DEFAULT_NFT, ["list", "tables"]))?.map_err(|source| {
        Error::Nft { op: "listing", family: Family::Inet, table: Ident("all".into()), source: Box::new(source) }
    })?;
    let mut found = Vec::new();
    for obj in objects(&out)? {
        let Some(t) = obj.get("table") else { continue };
        let family = match t.get("family").and_then(Value::as_str) {
            Some("ip") => Family::Ip,
            Some("ip6") => Family::Ip6,
            Some("inet") => Family::Inet,
            _ => continue,
        };
        let name = t.get("name").and_then(Value::as_str).ok_or_else(|| Error::Output(t.to_string()))?;
        found.push((family, name.parse().map_err(|_| Error::Output(t.to_string()))?));
    }
    Ok(found)
}

fn objects(out: &str) -> Result<Vec<Value>, Error> {
    let v: Value = serde_json::from_str(out).map_err(|e| Error::Output(e.to_string()))?;
    let list = v.get("nftables").and_then(Value::as_array).ok_or_else(|| Error::Output(out.chars().take(200).collect()))?;
    Ok(list.iter().filter(|o| o.get("metainfo").is_none()).cloned().collect())
}
