import { jsonBody } from '../bodies.js';
import {
  adminMemberSchema,
  adminNewMemberSchema,
  adminNewOrganizationSchema,
  adminOrganizationLimitsChangeSchema,
  adminOrganizationSchema,
  adminUserLimitsChangeSchema,
  adminUserLimitsSchema,
  organizationUsageSchema,
} from '../organization-schemas.js';
import { json } from '../respond.js';
import { type PathParam, type RouteEntry, route } from '../route.js';
import type { HttpResponse } from '../types.js';
import { usageQuery } from './account.js';
import { noContent } from './shared.js';

/** The admin API's organisations (issue 40): create, read, members, usage. Served with the `admin` option. */

const ORGANIZATION_ID: PathParam = {
  doc: { name: 'organizationId', in: 'path', required: true, description: 'The organisation\u2019s id', schema: { type: 'string' } },
  notFound: 'No such organization.',
};
const MEMBER_ID: PathParam = {
  doc: { name: 'userId', in: 'path', required: true, description: 'The member\u2019s user id', schema: { type: 'string' } },
  notFound: 'No such organization member.',
};

const USER_ID: PathParam = {
  doc: { name: 'userId', in: 'path', required: true, description: 'The host\u2019s user id', schema: { type: 'string' } },
  notFound: 'No such user.',
};

/** An admin answer: never cached. */
function adminJson(status: number, value: unknown): HttpResponse {
  return json(status, JSON.stringify(value), { 'cache-control': 'no-store' });
}

export const organizationRoutes: RouteEntry[] = [
  route({
    name: 'createOrganization',
    method: 'POST',
    path: '/v1/admin/organizations',
    auth: 'admin',
    body: jsonBody(adminNewOrganizationSchema),
    answers: { 201: { description: 'Created', schema: adminOrganizationSchema } },
    errors: [400, 404, 409, 413, 415],
    doc: {
      operationId: 'adminCreateOrganization',
      tag: 'Admin',
      summary: 'Create an organisation',
      description:
        'An organisation with an optional budget (`{ amount, period: day | month | total }`), in-flight cap and weight (default 1). Its members\u2019 creates are held within them, with their own balance and key. Audited.',
    },
    handle: (call, s) => s.accounts.createOrganization(call.body() as never, { actor: call.actor }).then((org) => adminJson(201, org)),
  }),
  route({
    name: 'getOrganization',
    method: 'GET',
    path: '/v1/admin/organizations/{organizationId}',
    auth: 'admin',
    params: { organizationId: ORGANIZATION_ID },
    answers: { 200: { description: 'The organisation', schema: adminOrganizationSchema } },
    errors: [404],
    doc: {
      operationId: 'adminGetOrganization',
      tag: 'Admin',
      summary: 'Read an organisation',
      description: 'Its limits, members (oldest first), generations in flight and, with a budget, what is spent and left in the current window.',
    },
    handle: (call, s) => s.accounts.organization(call.param('organizationId')).then((org) => adminJson(200, org)),
  }),
  route({
    name: 'setOrganizationLimits',
    method: 'PATCH',
    path: '/v1/admin/organizations/{organizationId}',
    auth: 'admin',
    params: { organizationId: ORGANIZATION_ID },
    body: jsonBody(adminOrganizationLimitsChangeSchema),
    answers: { 200: { description: 'The organisation, changed', schema: adminOrganizationSchema } },
    errors: [400, 404, 413, 415],
    doc: {
      operationId: 'adminSetOrganizationLimits',
      tag: 'Admin',
      summary: 'Change an organisation\u2019s limits',
      description:
        'Its budget (`{ amount, period: day | month | total }`), in-flight cap and weight. Only the fields given change; `null` removes the budget or the cap. What its members hold stays held and settles as before; the new limits apply from the next create. Audited.',
    },
    handle(call, s) {
      return s.accounts.setOrganizationLimits(call.param('organizationId'), call.body() as never, { actor: call.actor }).then((org) => adminJson(200, org));
    },
  }),
  route({
    name: 'addMember',
    method: 'POST',
    path: '/v1/admin/organizations/{organizationId}/members',
    auth: 'admin',
    params: { organizationId: ORGANIZATION_ID },
    body: jsonBody(adminNewMemberSchema),
    answers: { 200: { description: 'The membership', schema: adminMemberSchema } },
    errors: [400, 404, 409, 413, 415],
    doc: {
      operationId: 'adminAddMember',
      tag: 'Admin',
      summary: 'Add a member',
      description: 'A user belongs to at most one organisation (409 when it is in another). Adding a member again sets its role. Audited.',
    },
    handle(call, s) {
      const organizationId = call.param('organizationId');
      return s.accounts.addMember(organizationId, call.body() as never, { actor: call.actor }).then((m) => adminJson(200, m));
    },
  }),
  route({
    name: 'removeMember',
    method: 'DELETE',
    path: '/v1/admin/organizations/{organizationId}/members/{userId}',
    auth: 'admin',
    params: { organizationId: ORGANIZATION_ID, userId: MEMBER_ID },
    answers: { 204: { description: 'Removed' } },
    errors: [404],
    doc: {
      operationId: 'adminRemoveMember',
      tag: 'Admin',
      summary: 'Remove a member',
      description: 'Releases nothing: the member\u2019s unfinished generations stay reserved under the organisation until they end. Audited.',
    },
    handle: (call, s) => s.accounts.removeMember(call.param('organizationId'), call.param('userId'), { actor: call.actor }).then(noContent),
  }),
  route({
    name: 'organizationUsage',
    method: 'GET',
    path: '/v1/admin/organizations/{organizationId}/usage',
    auth: 'admin',
    params: { organizationId: ORGANIZATION_ID },
    query: usageQuery(['day', 'member']),
    answers: { 200: { description: 'Usage', schema: organizationUsageSchema } },
    errors: [400, 404],
    doc: {
      operationId: 'adminOrganizationUsage',
      tag: 'Admin',
      summary: 'An organisation\u2019s usage',
      description: 'Settled spend of the generations reserved under it, per UTC day or per member; `from` and `to` as for `/v1/usage`.',
    },
    handle: (call, s) => s.accounts.organizationUsage(call.param('organizationId'), call.query()).then((report) => adminJson(200, report)),
  }),
  route({
    name: 'setUserLimits',
    method: 'PATCH',
    path: '/v1/admin/users/{userId}/limits',
    auth: 'admin',
    params: { userId: USER_ID },
    body: jsonBody(adminUserLimitsChangeSchema),
    answers: { 200: { description: 'The user\u2019s limits, changed', schema: adminUserLimitsSchema } },
    errors: [400, 404, 413, 415],
    doc: {
      operationId: 'adminSetUserLimits',
      tag: 'Admin',
      summary: 'Set a user\u2019s own limits',
      description:
        'A budget (`{ amount, period: day | month | total }`) and an in-flight cap of the user\u2019s own, held by each of its creates with its balance, its key and its organisation (402 `budget_exceeded` / 429 beyond them). Only the fields given change; `null` removes one. Counting starts when limits are first set. Audited.',
    },
    handle: (call, s) => s.accounts.setUserLimits(call.param('userId'), call.body() as never, { actor: call.actor }).then((v) => adminJson(200, v)),
  }),
  route({
    name: 'getUserLimits',
    method: 'GET',
    path: '/v1/admin/users/{userId}/limits',
    auth: 'admin',
    params: { userId: USER_ID },
    answers: { 200: { description: 'The user\u2019s limits and what they hold', schema: adminUserLimitsSchema } },
    errors: [404],
    doc: {
      operationId: 'adminGetUserLimits',
      tag: 'Admin',
      summary: 'Read a user\u2019s own limits',
      description: 'Its budget and in-flight cap (none when never set), with its generations in flight and, with a budget, its spend in the current window.',
    },
    handle: (call, s) => s.accounts.userLimits(call.param('userId')).then((v) => adminJson(200, v)),
  }),
];
