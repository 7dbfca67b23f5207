/**
 * Resources: the user's recent generations (`GET /v1/generations`), each at `genservice://generations/{id}`. Reading
 * one gives its result (the text, or the file as a base64 blob when at most `inlineMaxBytes`, else its signed URL as
 * `text/uri-list`), or its details view as JSON while it is unfinished or after it failed.
 */
import type { GenerationItem, ResultType } from '@genservice/core';
import { ErrorCode, McpError, type ListResourcesResult, type ReadResourceResult, type Resource, type ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';
import type { Api } from './api.js';
import { FollowError, generationPath } from './follow.js';
import { filePath, readFile } from './results.js';

export const RESOURCE_URI_PREFIX = 'genservice://generations/';

/** MCP's code for a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002;

export const RESOURCE_TEMPLATES: ResourceTemplate[] = [
  {
    uriTemplate: `${RESOURCE_URI_PREFIX}{generationId}`,
    name: 'generation',
    title: 'A generation of yours',
    description: 'Its result once completed (text, or the file), else its details as JSON. The id is a generation id or an MCP task id.',
  },
];

export function resourceUri(generationId: string): string {
  return `${RESOURCE_URI_PREFIX}${encodeURIComponent(generationId)}`;
}

function resourceOf(d: GenerationItem, resultType: ResultType | undefined): Resource {
  const price = d.price !== undefined ? `, charged ${d.price} tokens` : '';
  return {
    uri: resourceUri(d.generationId),
    name: d.generationId,
    title: `${d.modelId} (${d.status})`,
    description: `A ${resultType ?? ''}${resultType ? ' ' : ''}generation of ${d.modelId}, ${d.status}${price}; created ${d.createdAt}.`,
    ...(d.status === 'completed' && resultType === 'text' ? { mimeType: 'text/plain' } : {}),
    ...(d.status !== 'completed' ? { mimeType: 'application/json' } : {}),
  };
}

/** One page of the user's generations, newest first. */
export async function listResources(api: Api, pageSize: number, cursor: string | undefined, types: Map<string, ResultType>): Promise<ListResourcesResult> {
  const query = new URLSearchParams({ limit: String(pageSize) });
  if (cursor !== undefined) query.set('cursor', cursor);
  const res = await api.json<{ data: GenerationItem[]; nextCursor: string | null }>('GET', `/v1/generations?${query}`);
  if (!res.ok) throw new McpError(ErrorCode.InvalidParams, `${res.error.message} (${res.error.code})`);
  return {
    resources: res.value.data.map((d) => resourceOf(d, types.get(d.modelId))),
    ...(res.value.nextCursor ? { nextCursor: res.value.nextCursor } : {}),
  };
}

export async function readResource(api: Api, uri: string, inlineMaxBytes: number, types: Map<string, ResultType>): Promise<ReadResourceResult> {
  const notFound = (): McpError => new McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`, { uri });
  if (!uri.startsWith(RESOURCE_URI_PREFIX)) throw notFound();
  let id: string;
  try {
    id = decodeURIComponent(uri.slice(RESOURCE_URI_PREFIX.length));
  } catch {
    throw notFound();
  }
  if (id === '' || id.includes('/')) throw notFound();
  const res = await api.json<GenerationItem>('GET', generationPath(id, '/details'));
  if (!res.ok) {
    if (res.error.status === 404) throw notFound();
    throw new FollowError(res.error);
  }
  const d = res.value;
  if (d.status !== 'completed' || d.result === undefined) return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(d) }] };
  const path = types.get(d.modelId) === 'text' ? null : filePath(d.result);
  if (path === null) return { contents: [{ uri, mimeType: 'text/plain', text: d.result }] };
  const file = await readFile(api, path, inlineMaxBytes);
  if (file.bytes) return { contents: [{ uri, mimeType: file.mimeType ?? 'application/octet-stream', blob: Buffer.from(file.bytes).toString('base64') }] };
  return { contents: [{ uri, mimeType: 'text/uri-list', text: `${d.result}\r\n` }] };
}
