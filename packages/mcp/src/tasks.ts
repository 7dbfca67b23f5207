/**
 * MCP tasks (SEP-1686) on genservice's generations, one to one: a task's id is its generation's id, so it is as durable
 * as the generation (it outlives the MCP session and the process, and any instance on the same store answers for it),
 * and as private (another user's task id is not found, exactly as on the API).
 */
import type { GenerationItem } from '@genservice/core';
import { ErrorCode, McpError, type Task } from '@modelcontextprotocol/sdk/types.js';
import type { ApiError } from './api.js';

/** The MCP status of a generation: pending and processing are `working`; a cancelled failure is `cancelled`. */
export function taskStatus(d: Pick<GenerationItem, 'status' | 'error'>): Task['status'] {
  switch (d.status) {
    case 'pending':
    case 'processing':
      return 'working';
    case 'completed':
      return 'completed';
    case 'failed':
      return d.error?.code === 'cancelled' ? 'cancelled' : 'failed';
  }
}

function statusMessage(d: GenerationItem): string {
  switch (d.status) {
    case 'pending':
      return 'Waiting for a worker.';
    case 'processing': {
      if (!d.progress) return 'Generating.';
      const percent = Math.round(d.progress.fraction * 100);
      return `Generating: ${percent}%${d.progress.message ? ` (${d.progress.message})` : ''}.`;
    }
    case 'completed':
      return `Completed; charged ${d.price ?? 0} tokens.`;
    case 'failed':
      return d.error ? `${d.error.message} (${d.error.code}); charged ${d.price ?? 0} tokens.` : `Failed; charged ${d.price ?? 0} tokens.`;
  }
}

/**
 * The task of a generation. `ttl` is how long it is kept from its creation: known once the service set its
 * `expiresAt` (retention, or the create's `expiresAfterSeconds`), else null (kept until deleted). `lastUpdatedAt` is the
 * latest of its timestamps (the details view keeps no time of its last progress report).
 */
export function taskOf(d: GenerationItem, pollIntervalMs: number): Task {
  const created = Date.parse(d.createdAt);
  const expires = d.expiresAt ? Date.parse(d.expiresAt) : Number.NaN;
  return {
    taskId: d.generationId,
    status: taskStatus(d),
    statusMessage: statusMessage(d),
    createdAt: d.createdAt,
    lastUpdatedAt: d.finishedAt ?? d.startedAt ?? d.createdAt,
    ttl: Number.isFinite(expires) && Number.isFinite(created) ? Math.max(0, expires - created) : null,
    ...(taskStatus(d) === 'working' ? { pollInterval: pollIntervalMs } : {}),
  };
}

export function isTerminalTask(status: Task['status']): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}

/** The protocol error of a task request the API refused: a missing (or another user's) generation is -32602. */
export function taskError(taskId: string, e: ApiError): McpError {
  if (e.status === 404) return new McpError(ErrorCode.InvalidParams, `Failed to retrieve task: Task not found (${taskId})`);
  if (e.status === 400) return new McpError(ErrorCode.InvalidParams, e.message, { code: e.code, details: e.details });
  return new McpError(ErrorCode.InternalError, `${e.message} (${e.code})`, { status: e.status, code: e.code, retryAfterSeconds: e.retryAfterSeconds });
}
