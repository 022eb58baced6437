//! `pith user add`: create an account from the command line (the way to
//! make the first administrator) and print a fresh API token.

use anyhow::Context;

use crate::auth::{hash_password, new_token, token_digest};
use crate::config::UserAddConfig;
use crate::model::{Password, Username};
use crate::store::Store;
use crate::store::sqlite::{SqliteOptions, SqliteStore};

pub fn add(cfg: UserAddConfig) -> anyhow::Result<()> {
    let name = Username::parse(&cfg.name).map_err(|e| anyhow::anyhow!("invalid user name: {e}"))?;
    let hash = match cfg.password.as_deref() {
        Some(p) => {
            let p = Password::parse(p).map_err(|e| anyhow::anyhow!("invalid password: {e}"))?;
            Some(hash_password(p.as_str()).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let path = cfg.data.sqlite_path()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let opts = SqliteOptions { readers: 1, ..SqliteOptions::default() };
        let store =
            SqliteStore::open(&path, &opts).with_context(|| format!("cannot open database {}", path.display()))?;
        let result = async {
            let user = store.create_user(name, hash, cfg.admin).await?;
            let token = new_token();
            store.add_token(user.id, token_digest(&token)).await?;
            anyhow::Ok((user, token))
        }
        .await;
        store.shutdown().await;
        let (user, token) = result?;
        eprintln!("created user {} (id {}{})", user.name, user.id, if user.is_admin { ", admin" } else { "" });
        println!("{token}");
        Ok(())
    })
}
