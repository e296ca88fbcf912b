/**
 * @agl/dashboard: a web dashboard for an Agent Lightning store. The page (Preact, with @agl/adapter
 * bundled in so triplets are computed in the browser) reads only the v0.3 REST API. Serve it from
 * agl-store (mounted at /dashboard when this package is installed) or standalone with
 * `agl-dashboard --store URL`.
 */
export { createDashboardApp, type DashboardAppOptions, defaultAssetsDir } from "./server/dashboard-app.js";
export { forwardToStore, isReadOnlyCall, READ_ROUTES, readRoutePath } from "./server/forward.js";
export {
  createStandaloneApp,
  type DashboardServer,
  type DashboardServerOptions,
  startDashboardServer,
} from "./server/standalone.js";
