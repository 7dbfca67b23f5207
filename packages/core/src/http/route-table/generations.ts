import type { GenerationView, ModelInfo } from '../../domain/types.js';
import { generationPageDoc, ref } from '../../openapi/common.js';
import { createBody, noBody } from '../bodies.js';
import { modelFilter, pageCursor, pageLimit, querySchema, statusFilter } from '../query.js';
import { fail, header, json, viewJson } from '../respond.js';
import { type Answer, type RouteEntry, type RouteServices, type UserCall, route } from '../route.js';
import { cancelResponseSchema, createResponseSchema, modelsResponseSchema, quoteResponseSchema } from '../schemas.js';
import type { HttpResponse } from '../types.js';
import { GENERATION_ID, idempotencyKeyHeader, jsonOf, noContent, pollRate } from './shared.js';

/** The models, and a user's generations: create, list, read (also as a long-poll), cancel, delete; and a quote. */

const PREFER_WAIT = { name: 'Prefer', in: 'header', required: false, description: 'RFC 7240 `wait=N` (seconds, at most 60): a long-poll', schema: { type: 'string' } };
const WAIT_APPLIED = { 'Preference-Applied': { description: 'The wait that was honoured', schema: { type: 'string' } } };

/** The JSON of a model list, made once per list: the service's own list is frozen, so the same array reads the same. */
const modelsText = new WeakMap<ModelInfo[], string>();
function modelsJson(models: ModelInfo[]): string {
  let text = modelsText.get(models);
  if (text === undefined) {
    text = JSON.stringify({ models });
    // Only a frozen list is kept: a host's own listModels may hand out an array it changes later.
    if (Object.isFrozen(models)) modelsText.set(models, text);
  }
  return text;
}

function viewAnswer(view: GenerationView): HttpResponse {
  return json(200, viewJson(view));
}

/**
 * `wait=N` of a Prefer header (RFC 7240; several preferences, any order, case-insensitive name), capped at `max`.
 * Undefined when there is none or it is not a whole number of seconds.
 */
function preferredWait(prefer: string | undefined, max: number): number | undefined {
  if (!prefer) return undefined;
  for (const part of prefer.split(',')) {
    const m = /^\s*wait\s*=\s*"?(\d{1,6})"?\s*(?:;.*)?$/i.exec(part);
    if (m) return Math.min(Number(m[1]), max);
  }
  return undefined;
}

/**
 * A read of one generation: the contract's view, or the details (its own path, or `?include=details` on the poll);
 * with `Prefer: wait=N`, once it changes. Not an async function: the use case's promise is the answer.
 */
function read(call: UserCall, s: RouteServices, detailsPath: boolean): Answer {
  const id = call.param('id');
  const query = call.rawQuery;
  const include = query === '' || detailsPath ? null : new URLSearchParams(query).getAll('include');
  const details = detailsPath || (include !== null && include.length > 0);
  if (include !== null && include.length > 0 && (include.length > 1 || include[0] !== 'details')) {
    return fail('invalid_request', 'include must be "details".', [{ field: 'include', code: 'invalid_value', message: 'must be "details"' }]);
  }
  const userId = call.userId;
  const baseUrl = call.req.baseUrl;
  const wait = preferredWait(header(call.req, 'prefer'), s.options.push.maxWaitSeconds);
  if (wait !== undefined) {
    // The details long-poll answers new partial output too; the contract's poll only a change of status.
    return s.live.waitForChange(userId, id, wait, details).then(async (rec) => {
      // Details are read again (with the partial output from the log); the plain poll answers the record.
      const body = details ? await s.generations.details(userId, rec.id, { baseUrl }) : s.views.view(rec, baseUrl);
      return json(200, JSON.stringify(body), { 'preference-applied': `wait=${wait}`, vary: 'Prefer' });
    });
  }
  const options = { baseUrl };
  if (details) return s.generations.details(userId, id, options).then((item) => jsonOf(200, item));
  return s.generations.get(userId, id, options).then(viewAnswer);
}

export const generationRoutes: RouteEntry[] = [
  route({
    name: 'models',
    method: 'GET',
    path: '/v1/models',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    answers: { 200: { description: 'The models', schema: modelsResponseSchema } },
    doc: { operationId: 'listModels', tag: 'Models', summary: 'List the models', description: 'Every model with its result type, estimated time and settings descriptors.' },
    handle(call, s) {
      // A key's allow-list: the other models are not there for it.
      const allowed = call.principal.models;
      const models = s.generations.listModels();
      return json(200, allowed === undefined ? modelsJson(models) : JSON.stringify({ models: models.filter((m) => allowed.includes(m.modelId)) }));
    },
  }),
  route({
    name: 'list',
    method: 'GET',
    path: '/v1/generations',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    query: querySchema({ limit: pageLimit, cursor: pageCursor, status: statusFilter, modelId: modelFilter }, 'refused'),
    answers: { 200: { description: 'A page', schema: generationPageDoc } },
    errors: [400],
    doc: { operationId: 'listGenerations', tag: 'Generations', summary: 'List your generations', description: 'Newest first, a page at a time (keyset cursor).' },
    handle: (call, s) => s.generations.list(call.userId, { ...call.query(), baseUrl: call.req.baseUrl }).then((page) => jsonOf(200, page)),
  }),
  route({
    name: 'create',
    method: 'POST',
    path: '/v1/generations',
    auth: 'user',
    scope: 'generate',
    rate: 'create',
    headers: [idempotencyKeyHeader('Repeat a create safely: the same key and body answer the first generation again')],
    body: createBody,
    answers: { 201: { description: 'Started', schema: createResponseSchema } },
    errors: [400, 402, 403, 404, 409, 413, 415, 422],
    doc: {
      operationId: 'createGeneration',
      tag: 'Generations',
      summary: 'Start a generation',
      description: 'Validates the settings, reserves the price and starts the work in the background; answers at once.',
    },
    handle(call, s) {
      const input = call.body();
      const idempotencyKey = call.idempotencyKey();
      // Two literals, not a conditional spread (V8's slow path on every create: issue 36).
      const options = idempotencyKey !== undefined ? { key: call.principal, baseUrl: call.req.baseUrl, idempotencyKey } : { key: call.principal, baseUrl: call.req.baseUrl };
      return s.generations.create(call.userId, input, options).then((created) => json(201, `{"generationId":${JSON.stringify(created.generationId)}}`));
    },
  }),
  route({
    name: 'get',
    method: 'GET',
    path: '/v1/generations/{id}',
    auth: 'user',
    scope: 'read',
    rate: pollRate,
    params: { id: GENERATION_ID },
    headers: [PREFER_WAIT],
    answers: { 200: { description: 'Status and result', headers: WAIT_APPLIED, schema: ref('Generation') } },
    errors: [400, 404],
    doc: {
      operationId: 'getGeneration',
      tag: 'Generations',
      summary: 'Read a generation',
      description:
        'The contract\u2019s exact shape for its state (the richer view is GET /v1/generations/{id}/details). With `Prefer: wait=N`, answers when its status changes or after N seconds.',
    },
    handle: (call, s) => read(call, s, false),
  }),
  route({
    name: 'delete',
    method: 'DELETE',
    path: '/v1/generations/{id}',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: GENERATION_ID },
    body: noBody,
    answers: { 204: { description: 'Deleted' } },
    errors: [400, 404],
    doc: {
      operationId: 'deleteGeneration',
      tag: 'Generations',
      summary: 'Delete a generation',
      description:
        'A pending or processing generation is cancelled first (charged as a cancel). Its result files, settings, result, metadata, events and webhook deliveries are deleted; the charge stays in the ledger. Afterwards every read of it answers 404. Sends `generation.deleted` to webhooks that list it. No body.',
    },
    handle(call, s) {
      // Nothing to send with a delete: a body is refused before anything is deleted.
      call.body();
      return s.generations.delete(call.userId, call.param('id')).then(noContent);
    },
  }),
  // The details view has a path of its own (also `?include=details` on the poll): a generated client types the poll's
  // answer as exactly the contract's per-status shapes only when no other shape shares its operation.
  route({
    name: 'details',
    method: 'GET',
    path: '/v1/generations/{id}/details',
    auth: 'user',
    scope: 'read',
    rate: pollRate,
    params: { id: GENERATION_ID },
    headers: [PREFER_WAIT],
    answers: { 200: { description: 'The generation with its details', headers: WAIT_APPLIED, schema: ref('GenerationDetails') } },
    errors: [400, 404],
    doc: {
      operationId: 'getGenerationDetails',
      tag: 'Generations',
      summary: 'Read a generation with its details',
      description:
        'Timestamps, progress, metadata, the partial output streamed so far (processing) and the reason of a failure, in one shape per status. With `Prefer: wait=N`, answers when its status changes, when new partial output arrives, or after N seconds.',
    },
    handle: (call, s) => read(call, s, true),
  }),
  route({
    name: 'cancel',
    method: 'POST',
    path: '/v1/generations/{id}/cancel',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: GENERATION_ID },
    answers: { 200: { description: 'Cancelled, or already finished', schema: cancelResponseSchema } },
    errors: [404],
    doc: {
      operationId: 'cancelGeneration',
      tag: 'Generations',
      summary: 'Cancel a generation',
      description: 'Free while pending; the model\u2019s failure fee once it is processing. A finished one is unchanged.',
    },
    handle: (call, s) =>
      s.generations
        .cancel(call.userId, call.param('id'), { baseUrl: call.req.baseUrl })
        .then(({ outcome, generation }) => jsonOf(200, { ...generation, cancelled: outcome === 'cancelled' })),
  }),
  route({
    name: 'quote',
    method: 'POST',
    path: '/v1/quotes',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    body: createBody,
    answers: { 200: { description: 'Price and balance', schema: quoteResponseSchema } },
    errors: [400, 404, 413, 415],
    doc: {
      operationId: 'quoteGeneration',
      tag: 'Account',
      summary: 'Price a generation before starting it',
      description: 'Checks the body exactly like a create, reserves and stores nothing.',
    },
    handle: (call, s) => s.generations.quote(call.userId, call.body(), { key: call.principal, baseUrl: call.req.baseUrl }).then((quote) => jsonOf(200, quote)),
  }),
];
