//! A fresh PostgreSQL database per test, on the server named by
//! `PITH_TEST_DATABASE_URL` (default: the local service on 127.0.0.1:5432,
//! trust auth). `test.sh` makes sure that server runs
//! (tests/lib/postgres.sh); a test fails, never skips, when it does not.

use pith::store::postgres::{PgOptions, PgStore};

const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database `pith_test_<random>` that is dropped when this is.
pub struct TestDb {
    /// The server's maintenance database, to create and drop from.
    admin_url: String,
    pub name: String,
    /// Where the test database is.
    pub url: String,
}

fn server_url() -> String {
    std::env::var("PITH_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_SERVER.to_owned())
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{db}", &base[..path_start]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is not reachable at {url} ({e}). Run the tests with ./test.sh, which starts it \
             (tests/lib/postgres.sh), or point PITH_TEST_DATABASE_URL at a server where this user may \
             create databases."
        )
    });
    tokio::spawn(conn);
    client
}

impl TestDb {
    pub async fn create() -> TestDb {
        let admin_url = server_url();
        let name = format!("pith_test_{:016x}", rand::random::<u64>());
        admin(&admin_url)
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("cannot create database {name} on {admin_url}: {e}"));
        let url = with_database(&admin_url, &name);
        TestDb { admin_url, name, url }
    }

    /// A store on this database (migrated on connect).
    pub async fn store(&self) -> PgStore {
        PgStore::connect(&self.url, &PgOptions { pool_size: 4, ..PgOptions::default() }).await.expect("connect")
    }

    /// A plain connection, to look at the tables.
    pub async fn client(&self) -> tokio_postgres::Client {
        admin(&self.url).await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop cannot await: a short-lived runtime on its own thread does it.
        let (url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                let client = admin(&url).await;
                client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop the test database {}: {dropped:?}", self.name);
        }
    }
}

#[test]
fn the_database_of_a_url_is_replaced_keeping_everything_else() {
    assert_eq!(with_database("postgres://u:p@h:5/postgres", "x"), "postgres://u:p@h:5/x");
    assert_eq!(with_database("postgres://h/postgres?sslmode=disable", "x"), "postgres://h/x?sslmode=disable");
    assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
}
