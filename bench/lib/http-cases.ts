/**
 * The HTTP cases and the bench servers, shared by the measured bench (http/load.ts) and the by-hand CPU-per-request
 * script (http/cpu-per-request.ts), so both send exactly the same requests to the same servers.
 */
import type { ChildProcess } from 'node:child_process';
import { API_KEY, BAD_KEY, INVALID_BODY, VALID_BODY } from './fixture.js';
import { nextMessage, spawnTs } from './proc.js';

export type Framework = 'express' | 'fastify' | 'koa';
export type CaseName = 'get' | 'post' | 'models' | 'unauth' | 'invalid';

export interface CaseDef {
  name: CaseName;
  method: 'GET' | 'POST';
  path: (id: string) => string;
  headers: Record<string, string>;
  body?: string;
  status: number;
  /** Cases measured against a bare route; the others are compared with our own POST. */
  bare: boolean;
  /**
   * Measured until every generation the run created has completed: after the load, the server is asked to `drain`
   * and the time that takes is added to the run's duration (requests/s = requests / (load time + drain time)).
   */
  untilCompleted?: boolean;
}

const JSON_AUTH = { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` };

export const CASES: CaseDef[] = [
  { name: 'get', method: 'GET', path: (id) => `/v1/generations/${id}`, headers: { authorization: `Bearer ${API_KEY}` }, status: 200, bare: true },
  { name: 'post', method: 'POST', path: () => '/v1/generations', headers: JSON_AUTH, body: VALID_BODY, status: 201, bare: true, untilCompleted: true },
  { name: 'models', method: 'GET', path: () => '/v1/models', headers: { authorization: `Bearer ${API_KEY}` }, status: 200, bare: true },
  {
    name: 'unauth',
    method: 'POST',
    path: () => '/v1/generations',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${BAD_KEY}` },
    body: VALID_BODY,
    status: 401,
    bare: false,
  },
  { name: 'invalid', method: 'POST', path: () => '/v1/generations', headers: JSON_AUTH, body: INVALID_BODY, status: 400, bare: false },
];

export interface Target {
  child: ChildProcess;
  port: number;
  id: string;
}

/**
 * A bench server; `metrics` (ours only) records every metric through a Prometheus MeterProvider; `nodeArgs`, node flags
 * for its process (`--trace-gc-nvp`, a V8 flag to try); `quiet` pipes its output (`child.stdout`) instead of sharing ours.
 */
export async function startServer(framework: Framework, variant: 'ours' | 'bare', metrics = false, nodeArgs: string[] = [], quiet = false): Promise<Target> {
  const child = spawnTs(`servers/${framework}.ts`, { core: 0, args: metrics ? [variant, 'metrics'] : [variant], nodeArgs, quiet });
  const ready = await nextMessage<{ port: number; id: string }>(child, (m) => m?.type === 'ready', 60_000);
  return { child, port: ready.port, id: ready.id };
}
