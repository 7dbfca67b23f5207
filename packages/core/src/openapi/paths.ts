import { type AnswerDoc, type DocContext, type Json, pathParamNames, type RouteEntry } from '../http/route.js';
import { COMMON, errors, json, schema } from './common.js';

/** The admin routes' security: an admin key, never a user's. */
const ADMIN = [{ adminBearer: [] }];

/** The `paths` of the OpenAPI document: one operation for each entry of the route table that has a `doc`. */
export function pathsOf(routes: readonly RouteEntry[], ctx: DocContext): Json {
  const paths: Record<string, Json> = {};
  for (const r of routes) {
    if (r.doc === undefined) continue;
    paths[r.path] ??= {};
    paths[r.path]![r.method.toLowerCase()] = operation(r, ctx);
  }
  return paths;
}

/** One operation: its words from `doc`; parameters, body, answers and security from the entry itself. */
function operation(r: RouteEntry, ctx: DocContext): Json {
  const doc = r.doc!;
  const parameters = [
    ...pathParamNames(r.path).map((name) => {
      const param = r.params?.[name];
      if (param === undefined) throw new Error(`route ${r.method} ${r.path}: {${name}} has no entry in params`);
      return param.doc;
    }),
    ...(r.query?.params.map((p) => p.doc) ?? []),
    ...(r.headers?.map((h) => (typeof h === 'function' ? h(ctx.options) : h)) ?? []),
  ];
  const content = r.body?.content?.(ctx) ?? (r.body?.doc ? json(r.body.doc(ctx)) : undefined);
  const responses: Json = {};
  for (const [status, a] of Object.entries(r.answers ?? {})) responses[status] = answer(a);
  Object.assign(responses, errors(...(r.errors ?? []), ...(r.auth === 'none' ? [] : COMMON)));
  return {
    operationId: doc.operationId,
    summary: doc.summary,
    description: doc.description,
    tags: [doc.tag],
    ...(r.auth === 'admin' ? { security: ADMIN } : r.auth === 'none' ? { security: [] } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(content !== undefined ? { requestBody: { required: true, content } } : {}),
    responses,
  };
}

function answer(a: AnswerDoc): Json {
  const content = a.content ?? (a.schema === undefined ? undefined : json('_zod' in a.schema ? schema(a.schema as Parameters<typeof schema>[0]) : a.schema));
  return { description: a.description, ...(a.headers ? { headers: a.headers } : {}), ...(content ? { content } : {}) };
}
