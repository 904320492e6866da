//! `testkit/java/EntryRouter.java`, a router of the application that calls one handler by
//! reflection and another through a method reference, the first doing three times the work of
//! the second by construction: what the tests of entry points judge.

/// The main class.
pub const MAIN: &str = "EntryRouter";
/// The application's frames (`methods-filtering-prefix`).
pub const PREFIX: &str = "EntryRouter";
/// The handler called by reflection, which does three quarters of the handlers' work.
pub const ORDERS: &str = "EntryRouter$Orders.handle";
/// The handler called through a method reference, a quarter of the work.
pub const USERS: &str = "EntryRouter$Users.handle";
/// [`ORDERS`]'s share of the handlers' CPU time.
pub const ORDERS_SHARE: f64 = 0.75;

/// The JVM options that compile the handlers apart from the router, as a real framework's are
/// (its dispatch sees many handlers, each too large to inline): inlined into the router's loop,
/// C2's debug information names many of their samples after the router or the reflection
/// accessor, for HotSpot's own JFR as for the profiler, and no rule could find them.
pub const JVM_ARGS: &[&str] = &[
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=dontinline,EntryRouter$*::handle",
];
