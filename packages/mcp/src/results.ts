/**
 * A finished generation as an MCP tool result: text as text content; an image or audio as `image` / `audio` content
 * (base64, with its MIME type) when it is at most `inlineMaxBytes`, else a `resource_link` to its signed URL; video and
 * 3d as a `resource_link`. A failed one is a tool error naming why. The file is read through the API's own file route.
 */
import type { GenerationItem, HttpResponse, ResultType } from '@genservice/core';
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import { Api, bodyBytes, discard, type ApiError } from './api.js';

/** The path of a signed file URL below the API's mount (`/v1/files/...?exp&sig`), or null for another URL. */
export function filePath(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  const at = parsed.pathname.lastIndexOf('/v1/files/');
  return at === -1 ? null : `${parsed.pathname.slice(at)}${parsed.search}`;
}

function plural(n: number | undefined): string {
  return `${n ?? 0} token${n === 1 ? '' : 's'}`;
}

/** What a finished generation's structured content says: its id, model, status, price and result or error. */
export function summaryOf(d: GenerationItem): Record<string, unknown> {
  return {
    generationId: d.generationId,
    modelId: d.modelId,
    status: d.status,
    price: d.price ?? 0,
    ...(d.status === 'completed' ? { result: d.result } : {}),
    ...(d.error ? { error: d.error } : {}),
    ...(d.servedModelId ? { servedModelId: d.servedModelId } : {}),
  };
}

export interface FileInfo {
  mimeType?: string;
  size?: number;
  /** The bytes, when asked for and the file is small enough. */
  bytes?: Uint8Array;
}

function headerNumber(res: HttpResponse, name: string): number | undefined {
  const n = Number(res.headers[name]);
  return res.headers[name] !== undefined && Number.isFinite(n) ? n : undefined;
}

/** The file's type and size (HEAD), and its bytes (GET) when `maxBytes` allows; nothing when the route will not serve it. */
export async function readFile(api: Api, path: string, maxBytes: number): Promise<FileInfo> {
  const head = await api.send('HEAD', path);
  await discard(head.body);
  if (head.status !== 200) return {};
  const info: FileInfo = { mimeType: head.headers['content-type']?.split(';')[0]?.trim(), size: headerNumber(head, 'content-length') };
  if (info.size === undefined || info.size > maxBytes) return info;
  const res = await api.send('GET', path);
  if (res.status !== 200) {
    await discard(res.body);
    return info;
  }
  const bytes = await bodyBytes(res.body);
  return bytes.byteLength <= maxBytes ? { ...info, bytes } : info;
}

function link(url: string, d: GenerationItem, file: FileInfo): ContentBlock {
  return {
    type: 'resource_link',
    uri: url,
    name: `${d.modelId}-${d.generationId}`,
    title: `Result of ${d.modelId}`,
    description: 'A signed URL of the file: it needs no key, and expires.',
    ...(file.mimeType ? { mimeType: file.mimeType } : {}),
    ...(file.size !== undefined ? { size: file.size } : {}),
  } as ContentBlock;
}

/** The tool result of a finished generation. */
export async function toolResult(api: Api, d: GenerationItem, resultType: ResultType | undefined, inlineMaxBytes: number): Promise<CallToolResult> {
  const summary = summaryOf(d);
  if (d.status !== 'completed') {
    const why = d.error ? `${d.error.message} (${d.error.code})` : 'no reason given';
    return {
      isError: true,
      content: [{ type: 'text', text: `Generation ${d.generationId} of ${d.modelId} failed: ${why}. Charged ${plural(d.price)}.` }],
      structuredContent: summary,
    };
  }
  const result = d.result ?? '';
  const footer: ContentBlock = { type: 'text', text: `Generation ${d.generationId} of ${d.modelId}, charged ${plural(d.price)}.` };
  const path = resultType === 'text' ? null : filePath(result);
  if (path === null) return { content: [{ type: 'text', text: result }, footer], structuredContent: summary };
  const inline = resultType === 'image' || resultType === 'audio' ? inlineMaxBytes : -1;
  const file = await readFile(api, path, inline);
  if (file.bytes && file.mimeType && (resultType === 'image' || resultType === 'audio')) {
    const data = Buffer.from(file.bytes).toString('base64');
    return { content: [{ type: resultType, data, mimeType: file.mimeType }, footer], structuredContent: summary };
  }
  return { content: [link(result, d, file), footer], structuredContent: summary };
}

/** The sentence of a refused create, naming each bad setting (without the `settings.` prefix: the tool's arguments). */
export function refusalText(modelId: string, e: ApiError): string {
  const parts: string[] = [];
  if (e.code === 'invalid_settings' || e.code === 'invalid_request') {
    const fields = (e.details ?? []).map((d) => `${d.field.replace(/^settings\./, '')}: ${d.message} (${d.code})`);
    parts.push(`The arguments do not fit ${modelId}${fields.length > 0 ? `: ${fields.join('; ')}` : `: ${e.message}`}.`);
  } else {
    parts.push(`${modelId} refused the call (${e.code}): ${e.message}`);
  }
  if (e.retryAfterSeconds !== undefined) parts.push(`Retry after ${e.retryAfterSeconds} s.`);
  parts.push('Nothing was charged.');
  return parts.join(' ');
}

/** A refused create as a tool error (`isError`), with the API's error as structured content. */
export function refusalResult(modelId: string, e: ApiError): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: refusalText(modelId, e) }],
    structuredContent: { error: { status: e.status, code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) } },
  };
}
