import { createHash } from 'node:crypto';
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { isConnectionError, mapPgError } from './errors.js';

/** Schema names become part of SQL text, so only plain lower-case identifiers are accepted. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function validateSchemaName(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) {
    throw new TypeError(
      `Invalid schema name ${JSON.stringify(schema)}: use 1-63 characters of a-z, 0-9 and _, not starting with a digit.`,
    );
  }
  return schema;
}

/** `"schema"` - quoted even though validated, so reserved words such as `user` still work. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Anything that runs a parameterized query: the pool, or a client inside a transaction. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}

/** The stores' options about how statements are sent (every Postgres store takes them beside `schema`). */
export interface PgStatementOptions {
  /**
   * Send statements with parameters as named (prepared) statements: each connection parses and plans a statement
   * once (Postgres keeps a generic plan once it is no worse than a fresh one), and afterwards only its values travel.
   * Turn off behind a pooler in transaction mode that does not keep prepared statements (PgBouncer before 1.21, or
   * without `max_prepared_statements`). Default true.
   */
  preparedStatements?: boolean;
}

/** Names of prepared statements by text. The epoch moves when a table changed under them (see `replanned`). */
const statementNames = new Map<string, string>();
let statementEpoch = 0;

/**
 * A statement's name: a hash of its text (which names the schema), so one text has one name on every connection and
 * two texts never share one, even on a host's pool that other code prepares on too.
 */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `genservice_${createHash('sha1').update(text).digest('base64url').slice(0, 24)}_${statementEpoch}`;
    if (statementNames.size >= 2000) statementNames.clear();
    statementNames.set(text, name);
  }
  return name;
}

/**
 * Whether `err` says a table changed under a prepared statement so its result type would change (a newer instance
 * migrated the schema): Postgres then refuses the statement on every connection that prepared it. New names make
 * each connection prepare it again.
 */
function replanned(err: unknown): boolean {
  if ((err as { code?: unknown } | null)?.code !== '0A000' || !/cached plan/.test((err as Error).message)) return false;
  statementEpoch++;
  statementNames.clear();
  return true;
}

/** `query` on a pool or a client: a named statement when it has parameters and `prepared`, else an unnamed one. */
function send<R extends QueryResultRow>(on: Pool | PoolClient, prepared: boolean, text: string, values?: unknown[]): Promise<QueryResult<R>> {
  if (prepared && values !== undefined && values.length > 0) return on.query<R>({ name: statementName(text), text, values });
  return on.query<R>(text, values);
}

/**
 * The pool plus the schema every statement is qualified with. Statements name `schema.table` instead of relying
 * on `search_path`, because the pool may be the host's own and serve other code.
 */
export class PgDatabase {
  readonly pool: Pool;
  readonly schema: string;
  /** Quoted schema, ready to prefix table names: `"genservice"`. */
  readonly s: string;
  private readonly prepared: boolean;

  constructor(pool: Pool, schema: string, options: PgStatementOptions = {}) {
    this.pool = pool;
    this.schema = validateSchemaName(schema);
    this.s = quoteIdent(this.schema);
    this.prepared = options.preparedStatements !== false;
  }

  async query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>> {
    try {
      try {
        return await send<R>(this.pool, this.prepared, text, values);
      } catch (err) {
        if (!replanned(err)) throw err;
        return await send<R>(this.pool, this.prepared, text, values);
      }
    } catch (err) {
      throw mapPgError(err);
    }
  }

  /**
   * Runs `fn` in a READ COMMITTED transaction on one connection; rolls back if it throws. A transaction refused
   * because a table changed under a prepared statement is run once more, under new statement names.
   */
  async transaction<T>(fn: (client: Queryable) => Promise<T>): Promise<T> {
    try {
      return await this.once(fn);
    } catch (err) {
      if (!replanned(err)) throw err;
      return await this.once(fn);
    }
  }

  private async once<T>(fn: (client: Queryable) => Promise<T>): Promise<T> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw mapPgError(err);
    }
    let broken: Error | undefined;
    const prepared = this.prepared;
    const on: Queryable = {
      query: <R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]) => send<R>(client, prepared, text, values),
    };
    try {
      await client.query('BEGIN');
      const result = await fn(on);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      if (isConnectionError(err)) {
        broken = err as Error;
      } else {
        await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
          broken = rollbackErr as Error;
        });
      }
      throw mapPgError(err);
    } finally {
      // A connection that failed mid-transaction may still hold it open: destroy it rather than reuse it.
      client.release(broken);
    }
  }
}

/** pg returns int8 and numeric as strings (they may not fit a double); our values always do. */
export function num(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

export function optNum(value: unknown): number | undefined {
  return value === null || value === undefined ? undefined : num(value);
}

export function optStr(value: unknown): string | undefined {
  return value === null || value === undefined ? undefined : String(value);
}

/** Amounts reach SQL as numeric; NaN and Infinity are valid numerics there, so refuse them here. */
export function assertAmount(amount: number, what: string): void {
  if (typeof amount !== 'number' || !Number.isFinite(amount) || amount < 0) {
    throw new RangeError(`${what} must be a finite number >= 0, got ${String(amount)}.`);
  }
}

/**
 * PostgreSQL text cannot hold U+0000, and the driver turns a lone surrogate into U+FFFD (so two different ids
 * would collide). Identifiers (ids, user ids, keys) are stored through this reversible escape, which leaves every
 * ordinary string - backslashes included - exactly as it is, so operators still read plain ids in the tables.
 * U+0001 is the escape character: `\x01 0` is NUL, `\x01 1` is U+0001, `\x01 s xxxx` a lone surrogate.
 */
const ESC = '\u0001';
const NEEDS_ESCAPE = /[\u0000\u0001\ud800-\udfff]/;

export function encodeKey(value: string): string {
  if (!NEEDS_ESCAPE.test(value)) return value;
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0) out += `${ESC}0`;
    else if (c === 1) out += `${ESC}1`;
    else if (c >= 0xd800 && c <= 0xdbff && (value.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      out += value.slice(i, i + 2);
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) out += `${ESC}s${c.toString(16)}`;
    else out += value[i];
  }
  return out;
}

export function decodeKey(stored: string): string {
  if (!stored.includes(ESC)) return stored;
  let out = '';
  for (let i = 0; i < stored.length; i++) {
    const ch = stored[i];
    const tag = stored[i + 1];
    if (ch !== ESC) out += ch;
    else if (tag === '0') (out += '\u0000'), i++;
    else if (tag === '1') (out += ESC), i++;
    else if (tag === 's') (out += String.fromCharCode(parseInt(stored.slice(i + 2, i + 6), 16))), (i += 5);
    else out += ch;
  }
  return out;
}

/**
 * Free text (a text result, a failure reason) is stored as is, except U+0000, which PostgreSQL text cannot hold
 * and which becomes U+FFFD. Escaping free text like identifiers would double every backslash in code or LaTeX
 * output for anyone reading the table.
 */
export function storableText(value: string | undefined): string | null {
  if (value === undefined) return null;
  return value.includes('\u0000') ? value.replace(/\u0000/g, '\ufffd') : value;
}
