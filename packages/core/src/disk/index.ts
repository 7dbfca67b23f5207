export { DiskBlobStore, type DiskBlobStoreOptions } from './disk-blob-store.js';
