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

/**
 * The pool plus the schema every statement is qualified with. Statements name `schema.table` instead of relying
 * on `search_path`, because the pool may be the host's own and serve other code.
 */
export class PgDatabase {
  readonly pool: Pool;
  readonly schema: string;
  /** Quoted schema, ready to prefix table names: `"genservice"`. */
  readonly s: string;

  constructor(pool: Pool, schema: string) {
    this.pool = pool;
    this.schema = validateSchemaName(schema);
    this.s = quoteIdent(this.schema);
  }

  async query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>> {
    try {
      return await this.pool.query<R>(text, values);
    } catch (err) {
      throw mapPgError(err);
    }
  }

  /** Runs `fn` in a READ COMMITTED transaction on one connection; rolls back if it throws. */
  async transaction<T>(fn: (client: Queryable) => Promise<T>): Promise<T> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw mapPgError(err);
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
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
