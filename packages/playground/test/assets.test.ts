// The package's file table and core's route to it: exact names only, hostile paths answered with core's JSON 404.
import { describe, expect, it } from 'vitest';
import { createGenerationService } from '@genservice/core';
import { playgroundAssetPaths, readPlaygroundAsset } from '@genservice/playground';

const provider = {
  models: [{ modelId: 'm', title: 'M', resultType: 'text' as const, estimatedGenerationTime: 1, settings: [], price: 1 }],
  generate: async () => ({ text: 'ok' }),
};

describe('readPlaygroundAsset', () => {
  it('serves the page and its files with their types', () => {
    const index = readPlaygroundAsset('/')!;
    expect(index.contentType).toBe('text/html; charset=utf-8');
    expect(new TextDecoder().decode(index.body)).toMatch(/^<!doctype html>/);
    expect(readPlaygroundAsset('/index.html')!.body).toBe(index.body);
    expect(readPlaygroundAsset('/app.js')!.contentType).toBe('text/javascript; charset=utf-8');
    expect(readPlaygroundAsset('/style.css')!.contentType).toBe('text/css; charset=utf-8');
    expect(playgroundAssetPaths()).toEqual(expect.arrayContaining(['/', '/index.html', '/app.js', '/api.js', '/form.js', '/viewer3d.js', '/style.css', '/icon.svg']));
  });

  it('answers null for every name that is not one of its files', () => {
    for (const path of [
      '',
      '/..',
      '/../package.json',
      '/../src/index.ts',
      '/%2e%2e/package.json',
      '/..%2fpackage.json',
      '//etc/passwd',
      '/assets/app.js',
      '/app.js/',
      '/APP.JS',
      '/app.js?x=1',
      '/app.js%00.html',
      '/./app.js',
      '\\app.js',
      '/constructor',
      '/__proto__',
    ]) {
      expect(readPlaygroundAsset(path), path).toBeNull();
    }
  });

  it('every script of the page is a file of its own (the CSP allows no inline script or style)', () => {
    const html = new TextDecoder().decode(readPlaygroundAsset('/')!.body);
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/\sstyle=|<style/);
    expect(html).not.toMatch(/\son[a-z]+=/);
    for (const src of html.matchAll(/(?:src|href)="([^"]+)"/g)) {
      if (src[1]!.startsWith('#')) continue;
      expect(readPlaygroundAsset(`/${src[1]}`), src[1]).not.toBeNull();
    }
  });
});

describe('the playground route of the service', () => {
  const service = createGenerationService({ providers: [provider], playground: true });

  it('redirects <mount>/playground to the page folder, keeping the query, so relative URLs resolve', async () => {
    const r = await service.handle({ method: 'GET', path: '/playground', headers: {} });
    expect(r.status).toBe(308);
    expect(r.headers.location).toBe('playground/');
    const q = await service.handle({ method: 'GET', path: '/playground?api=https%3A%2F%2Fapi.example.com', headers: {} });
    expect(q.headers.location).toBe('playground/?api=https%3A%2F%2Fapi.example.com');
  });

  it('serves the page with a CSP that allows only its own scripts and styles, without a key', async () => {
    const r = await service.handle({ method: 'GET', path: '/playground/', headers: {} });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(r.headers['content-security-policy']).toMatch(/script-src 'self'; style-src 'self'/);
    expect(r.headers['x-content-type-options']).toBe('nosniff');
    const js = await service.handle({ method: 'HEAD', path: '/playground/app.js', headers: {} });
    expect(js.status).toBe(200);
    expect(Number(js.headers['content-length'])).toBe(readPlaygroundAsset('/app.js')!.body.byteLength);
  });

  it('answers hostile paths with the JSON 404, never a file outside the table', async () => {
    for (const path of ['/playground/../package.json', '/playground/%2e%2e/package.json', '/playground/..%2f..%2fpackage.json', '/playground/x/../../v1/models', '/playground/nope.js']) {
      const r = await service.handle({ method: 'GET', path, headers: {} });
      expect(r.status, path).toBe(404);
      expect(JSON.parse(String(r.body)).error.code, path).toBe('not_found');
    }
    const post = await service.handle({ method: 'POST', path: '/playground/', headers: {} });
    expect(post.status).toBe(405);
  });
});
