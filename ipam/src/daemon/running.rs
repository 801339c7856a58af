//! The running service as the reload loop drives it: a new config file's settings are applied
//! when only the pools and reserved subnets changed, else refused naming the field; and who
//! sets the pools and reserved subnets (a flag, the config file, or the API).

use std::{
    future::Future,
    path::{Path, PathBuf},
};

use liqo_daemon::{ApplyError, Daemon, FieldError};

use crate::{
    service::{Managed, Service, ServiceError},
    settings::{self, Settings},
};

/// The running service as the reload loop drives it.
pub(super) struct Running {
    pub(super) service: Service,
    /// The flags, which win over every text of the file.
    pub(super) flags: Settings,
    /// The settings in force.
    pub(super) running: Settings,
    /// The config file, if any.
    pub(super) config: Option<PathBuf>,
}

/// Who sets the pools and reserved subnets: a flag, else the config file, else the API.
pub(super) fn managed(flags: &Settings, running: &Settings, config: Option<&Path>) -> Managed {
    let by = |flag: bool, given: bool, flag_name: &str, field: &str| {
        if flag {
            Some(flag_name.to_owned())
        } else if given {
            config.map(|p| format!("{field} in {}", p.display()))
        } else {
            None
        }
    };
    Managed {
        pools: by(
            flags.pools.is_some() || flags.additional_pools.is_some(),
            running.pools.is_some() || running.additional_pools.is_some(),
            "--pools/--additional-pools",
            "pools/additionalPools",
        ),
        reserved: by(
            flags.reserved_subnets.is_some(),
            running.reserved_subnets.is_some(),
            "--reserved-subnets",
            "reservedSubnets",
        ),
    }
}

impl Running {
    async fn apply_now(&mut self, new: Settings) -> Result<(), ApplyError> {
        let change = new
            .change_from(&self.running)
            .map_err(ApplyError::Refused)?;
        if change.pools.is_some() || change.reserved.is_some() {
            self.service
                .reconfigure_async(change.clone())
                .await
                .map_err(|e| match e {
                    ServiceError::Ipam(ipam) => {
                        let field = settings::refused_field(&change, &new, &ipam);
                        ApplyError::Refused(liqo_types::field::bad(field, ipam.to_string()))
                    }
                    // Saving failed and the change was undone: try again.
                    e @ (ServiceError::Store(_) | ServiceError::Stopped) => ApplyError::failed(e),
                })?;
            tracing::info!(pools = ?change.pools, reserved = ?change.reserved, "pools and reserved subnets changed");
        }
        self.service
            .set_managed(managed(&self.flags, &new, self.config.as_deref()));
        self.running = new;
        Ok(())
    }
}

impl Daemon for Running {
    type Config = Settings;

    fn parse(&self, text: &str) -> Result<Settings, FieldError> {
        let s = self.flags.clone().over(Settings::from_yaml(text)?);
        s.pools()?;
        s.reserved()?;
        s.store()?;
        Ok(s)
    }

    fn apply(&mut self, new: Settings) -> impl Future<Output = Result<(), ApplyError>> + Send {
        self.apply_now(new)
    }
}
