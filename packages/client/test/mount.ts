// TEMPORARY: a stand-in bridge until @genservice/express exists; replaced by the real adapter.
import type { Express, Request, Response } from 'express';
import type { GenerationService } from '@genservice/core';

export function mountGenService(app: Express, prefix: string, service: GenerationService): void {
  app.use(prefix, async (req: Request, res: Response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const r = await service.handle({
      method: req.method,
      path: req.url,
      headers: req.headers,
      body: chunks.length ? new Uint8Array(Buffer.concat(chunks)) : undefined,
    });
    res.status(r.status).set(r.headers).send(typeof r.body === 'string' ? r.body : Buffer.from(r.body));
  });
}
