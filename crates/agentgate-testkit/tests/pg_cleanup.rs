//! The PostgreSQL test database and schema are dropped when the test that
//! owns them panics: a panicking thread holds one, and afterwards the server
//! no longer has it.

use std::str::FromStr as _;

use agentgate_testkit::pg::{self, TestDatabase, TestSchema};
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection};

async fn count(query: &str, name: &str) -> i64 {
    let options = PgConnectOptions::from_str(&pg::server_url()).expect("URL");
    let mut conn = PgConnection::connect_with(&options).await.expect("connect");
    sqlx::query_scalar(query)
        .bind(name)
        .fetch_one(&mut conn)
        .await
        .expect("count")
}

async fn a_panicking_test_leaves_no_database_or_schema_behind() {
    let db = TestDatabase::create("agentgate_cleanup").await;
    let schema = TestSchema::create("agentgate_cleanup").await;
    let (db_name, schema_name) = (db.name().to_owned(), schema.name().to_owned());
    let databases = "SELECT COUNT(*) FROM pg_database WHERE datname = $1";
    let schemas = "SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1";
    assert_eq!(count(databases, &db_name).await, 1);
    assert_eq!(count(schemas, &schema_name).await, 1);
    let failed = std::thread::spawn(move || {
        let _held = (db, schema);
        panic!("the test fails while holding its database and schema");
    })
    .join();
    assert!(failed.is_err(), "the holder panicked");
    assert_eq!(
        count(databases, &db_name).await,
        0,
        "database {db_name} left behind"
    );
    assert_eq!(
        count(schemas, &schema_name).await,
        0,
        "schema {schema_name} left behind"
    );
}

fn main() -> std::process::ExitCode {
    agentgate_testkit::harness::Tests::new()
        .test(
            "a_panicking_test_leaves_no_database_or_schema_behind",
            a_panicking_test_leaves_no_database_or_schema_behind,
        )
        .run()
}
