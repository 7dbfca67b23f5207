/**
 * The MCP server of one HTTP request (the transport is stateless: nothing of an exchange lives in this process between
 * requests, so any instance answers any request). Every handler asks the API, with the key the request came with.
 */
import { createHash } from 'node:crypto';
import type { GenerationItem, GenerationService, ResultType } from '@genservice/core';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListTasksRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type CreateTaskResult,
  type RequestId,
  type ServerNotification,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { Api, ApiError } from './api.js';
import { follow, FollowError, generationPath, readDetails } from './follow.js';
import type { ResolvedMcpOptions } from './options.js';
import { listResources, readResource, RESOURCE_TEMPLATES } from './resources.js';
import { refusalResult, refusalText, toolResult } from './results.js';
import { isTerminalTask, taskError, taskOf } from './tasks.js';
import { modelsOf, type SettingsSchemas, toolOf } from './tools.js';

/** Non-task tool calls in flight in this process, so that `notifications/cancelled` (its own HTTP request) finds them. */
export class InFlightCalls {
  private readonly calls = new Map<string, AbortController>();

  key(authorization: string | undefined, sessionId: string | undefined, requestId: RequestId): string {
    return createHash('sha256').update(`${authorization ?? ''}\u0000${sessionId ?? ''}\u0000${JSON.stringify(requestId)}`).digest('base64url');
  }

  add(key: string, controller: AbortController): () => void {
    this.calls.set(key, controller);
    return () => {
      if (this.calls.get(key) === controller) this.calls.delete(key);
    };
  }

  cancel(key: string, reason: string): void {
    this.calls.get(key)?.abort(new CallCancelled(reason));
  }
}

/** The client cancelled a tool call (`notifications/cancelled`): its generation is cancelled too. */
class CallCancelled extends Error {}

/** What the MCP server of one request knows. */
export interface Exchange {
  service: GenerationService;
  api: Api;
  options: ResolvedMcpOptions;
  schemas: SettingsSchemas;
  inFlight: InFlightCalls;
  validator: jsonSchemaValidator;
  authorization: string | undefined;
  /** The `Mcp-Session-Id` the client sent (this package issued it at `initialize`). */
  sessionId: string | undefined;
}

/**
 * The `Idempotency-Key` of a tool call: derived from the session and the JSON-RPC id, so a call the client sends again
 * (a retry after a lost connection) creates and charges one generation. Without a session id there is none: request
 * ids alone repeat across a client's restarts.
 */
export function idempotencyKey(sessionId: string | undefined, requestId: RequestId): string | undefined {
  if (sessionId === undefined) return undefined;
  return `mcp-${createHash('sha256').update(`${sessionId}\u0000${JSON.stringify(requestId)}`).digest('base64url')}`;
}

/** The server's capabilities: tools (task-augmentable), resources, and tasks with list and cancel. */
export const CAPABILITIES = {
  tools: {},
  resources: {},
  tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
} as const;

/** A refused create as a protocol error: an unknown tool, or any refusal of a task-augmented call. */
function callError(name: string, e: ApiError): McpError {
  if (e.code === 'model_not_found') return new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
  return new McpError(e.status === 400 ? ErrorCode.InvalidParams : ErrorCode.InvalidRequest, refusalText(name, e), {
    status: e.status,
    code: e.code,
    ...(e.details ? { details: e.details } : {}),
    ...(e.retryAfterSeconds !== undefined ? { retryAfterSeconds: e.retryAfterSeconds } : {}),
  });
}

export function createExchangeServer(x: Exchange): Server {
  // The low-level Server (McpServer registers tools once, up front; ours depend on the key of each request).
  const server = new Server(x.options.serverInfo, {
    capabilities: CAPABILITIES,
    ...(x.options.instructions !== undefined ? { instructions: x.options.instructions } : {}),
    jsonSchemaValidator: x.validator,
  });
  const { api, options } = x;
  let types: Promise<Map<string, ResultType>> | undefined;
  const resultTypes = (): Promise<Map<string, ResultType>> => (types ??= modelsOf(api).then((models) => new Map(models.map((m) => [m.modelId, m.resultType]))));

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const [models, schemas] = await Promise.all([modelsOf(api), x.schemas.get()]);
    return { tools: models.map((m) => toolOf(x.service, m, schemas.get(m.modelId), options.inlineMaxBytes)) };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult | CreateTaskResult> => {
    const { name, arguments: args, task } = request.params;
    const key = idempotencyKey(x.sessionId, extra.requestId);
    const created = await api.json<{ generationId: string }>('POST', '/v1/generations', {
      json: { modelId: name, settings: args ?? {} },
      headers: key ? { 'idempotency-key': key } : {},
    });
    if (!created.ok) {
      // A refusal creates nothing and charges nothing. Without a task it is a tool error the model can read and fix;
      // a task-augmented call has no task to fail, so it is the protocol error of the same words.
      if (task || created.error.code === 'model_not_found') throw callError(name, created.error);
      return refusalResult(name, created.error);
    }
    const id = created.value.generationId;
    if (task) {
      const d = await readDetails(api, id);
      return {
        task: taskOf(d, options.taskPollIntervalMs),
        _meta: { 'io.modelcontextprotocol/model-immediate-response': `Started ${name} as task ${id}; its result comes with tasks/result.` },
      };
    }
    return callAndWait(x, id, name, extra, resultTypes);
  });

  server.setNotificationHandler(CancelledNotificationSchema, (n) => {
    if (n.params.requestId !== undefined) x.inFlight.cancel(x.inFlight.key(x.authorization, x.sessionId, n.params.requestId), n.params.reason ?? 'cancelled');
  });

  server.setRequestHandler(GetTaskRequestSchema, async (request) => {
    const { taskId } = request.params;
    const d = await api.json<GenerationItem>('GET', generationPath(taskId, '/details'));
    if (!d.ok) throw taskError(taskId, d.error);
    return taskOf(d.value, options.taskPollIntervalMs);
  });

  server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) => {
    const { taskId } = request.params;
    let last: Task | undefined;
    const notify = async (d: GenerationItem): Promise<void> => {
      const t = taskOf(d, options.taskPollIntervalMs);
      if (last && last.status === t.status && last.statusMessage === t.statusMessage) return;
      last = t;
      await extra.sendNotification({ method: 'notifications/tasks/status', params: t } as ServerNotification);
    };
    let final: GenerationItem;
    try {
      final = await follow(api, taskId, { signal: extra.signal, pollIntervalMs: options.taskPollIntervalMs, onUpdate: notify });
    } catch (err) {
      if (err instanceof FollowError) throw taskError(taskId, err.error);
      throw err;
    }
    await notify(final);
    const result = await toolResult(api, final, (await resultTypes()).get(final.modelId), options.inlineMaxBytes);
    return { ...result, _meta: { ...result._meta, [RELATED_TASK_META_KEY]: { taskId } } };
  });

  server.setRequestHandler(ListTasksRequestSchema, async (request) => {
    const query = new URLSearchParams({ limit: String(options.pageSize) });
    if (request.params?.cursor !== undefined) query.set('cursor', request.params.cursor);
    const page = await api.json<{ data: GenerationItem[]; nextCursor: string | null }>('GET', `/v1/generations?${query}`);
    if (!page.ok) throw new McpError(ErrorCode.InvalidParams, `${page.error.message} (${page.error.code})`);
    return { tasks: page.value.data.map((d) => taskOf(d, options.taskPollIntervalMs)), ...(page.value.nextCursor ? { nextCursor: page.value.nextCursor } : {}) };
  });

  server.setRequestHandler(CancelTaskRequestSchema, async (request) => {
    const { taskId } = request.params;
    // The API's cancel: free while pending, the failure fee once processing, refunded as on the API.
    const res = await api.json<{ status: string; cancelled: boolean }>('POST', generationPath(taskId, '/cancel'));
    if (!res.ok) throw taskError(taskId, res.error);
    const d = await readDetails(api, taskId).catch((err: unknown) => {
      throw err instanceof FollowError ? taskError(taskId, err.error) : err;
    });
    const t = taskOf(d, options.taskPollIntervalMs);
    if (!res.value.cancelled && isTerminalTask(t.status)) throw new McpError(ErrorCode.InvalidParams, `Cannot cancel task in terminal status: ${t.status}`);
    return t;
  });

  server.setRequestHandler(ListResourcesRequestSchema, async (request) => listResources(api, options.pageSize, request.params?.cursor, await resultTypes()));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: RESOURCE_TEMPLATES }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    try {
      return await readResource(api, request.params.uri, options.inlineMaxBytes, await resultTypes());
    } catch (err) {
      if (err instanceof FollowError) throw new McpError(ErrorCode.InternalError, `${err.error.message} (${err.error.code})`);
      throw err;
    }
  });
  return server;
}

/**
 * A tool call without a task: follows the generation to its end, sending the client's progress token a notification
 * as its progress grows, and answers with its result. The client going away stops the wait only (a retry of the same
 * request finds the same generation); an explicit `notifications/cancelled` cancels the generation as the API does.
 */
async function callAndWait(
  x: Exchange,
  id: string,
  name: string,
  extra: { requestId: RequestId; signal: AbortSignal; _meta?: { progressToken?: string | number }; sendNotification: (n: ServerNotification) => Promise<void> },
  resultTypes: () => Promise<Map<string, ResultType>>,
): Promise<CallToolResult> {
  const { api, options } = x;
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(extra.signal.reason);
  extra.signal.addEventListener('abort', onAbort, { once: true });
  const release = x.inFlight.add(x.inFlight.key(x.authorization, x.sessionId, extra.requestId), controller);
  const token = extra._meta?.progressToken;
  let sent = -1;
  try {
    const final = await follow(api, id, {
      signal: controller.signal,
      pollIntervalMs: options.taskPollIntervalMs,
      onUpdate: async (d) => {
        if (token === undefined) return;
        const percent = Math.floor((d.progress?.fraction ?? 0) * 100);
        if (percent <= sent) return; // progress must grow with each notification
        sent = percent;
        const message = d.progress?.message ?? (d.status === 'pending' ? 'waiting for a worker' : 'generating');
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: percent, total: 100, message } });
      },
    });
    return await toolResult(api, final, (await resultTypes()).get(final.modelId), options.inlineMaxBytes);
  } catch (err) {
    if (controller.signal.reason instanceof CallCancelled) {
      const cancel = await api.json<{ status: string; price?: number; cancelled: boolean }>('POST', generationPath(id, '/cancel'));
      const charged = cancel.ok ? `, charged ${cancel.value.price ?? 0} tokens` : '';
      return { isError: true, content: [{ type: 'text', text: `The call was cancelled: generation ${id} of ${name} was cancelled${charged}.` }] };
    }
    if (err instanceof FollowError) return refusalResult(name, err.error);
    throw err;
  } finally {
    extra.signal.removeEventListener('abort', onAbort);
    release();
  }
}
