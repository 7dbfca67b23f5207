import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';

// The SDK warns once per process that its 2027 releases will need Node 22; the tests run on Node 20 on purpose.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

/** s3rver's fixed credentials; it accepts any signature, so these only have to be present. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface LocalS3 {
  endpoint: string;
  /** A client on the server, for the tests' own look at the bucket. */
  client: S3Client;
  createBucket(name: string): Promise<void>;
  /** The keys of every object in a bucket (up to 1000). */
  keys(bucket: string): Promise<string[]>;
  close(): Promise<void>;
}

/** A real S3-compatible server (s3rver) on loopback, on a free port, keeping its objects in a temp directory. */
export async function startS3(): Promise<LocalS3> {
  const directory = await mkdtemp(join(tmpdir(), 'genservice-s3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
  return {
    endpoint,
    client,
    createBucket: async (name) => {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    keys: async (bucket) => {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      return (listed.Contents ?? []).map((o) => o.Key!);
    },
    close: async () => {
      client.destroy();
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
