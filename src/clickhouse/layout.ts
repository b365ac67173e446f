import { ident, type Settings } from './executor.js'

/**
 * Where the backend's tables live: a database, and optionally a cluster. With a cluster every DDL
 * statement runs `ON CLUSTER`, each table is a Replicated* engine named `<table>_local` on every
 * node, and `<table>` is a Distributed table over them (docs/clickhouse.md). Statements read and
 * write `<table>` either way.
 */
export interface Layout {
  database: string
  cluster?: string
}

/** `db`.`table`: the table statements read and write (the Distributed one on a cluster). */
export function table(l: Layout, name: string): string {
  return `${ident(l.database)}.${ident(name)}`
}

/** `db.table` unquoted (checked identifiers), for the executors' insert, whose clients quote nothing. */
export function insertTarget(l: Layout, name: string): string {
  ident(l.database)
  ident(name)
  return `${l.database}.${name}`
}

/** The table that holds the rows on this node: `<name>_local` on a cluster. */
export function localTable(l: Layout, name: string): string {
  return l.cluster ? `${ident(l.database)}.${ident(name + '_local')}` : table(l, name)
}

/** ` ON CLUSTER name`, or nothing. */
export function onCluster(l: Layout): string {
  return l.cluster ? ` ON CLUSTER ${ident(l.cluster)}` : ''
}

/**
 * Settings reads need on a cluster: a call's parts all live on one shard (the sharding key is the
 * call), so a subquery over the same table may run shard-locally rather than be refused
 * (`distributed_product_mode` defaults to deny for a subquery on a Distributed table).
 */
export function readSettings(l: Layout): Settings {
  return l.cluster ? { distributed_product_mode: 'local' } : {}
}

/**
 * Settings inserts need on a cluster: an insert into a Distributed table is by default queued on the
 * receiving node and sent to the shards later, so its acknowledgement would promise nothing; in the
 * foreground it returns once every shard has written its rows (with `insert_quorum`, on that many
 * replicas).
 */
export function writeSettings(l: Layout): Settings {
  return l.cluster ? { distributed_foreground_insert: 1 } : {}
}
