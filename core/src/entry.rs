//! Entry points: in each branch, the method that started its unit of work. For a request, the
//! handler the framework dispatched to (a servlet's `doGet`, a Spring controller method, a
//! JAX-RS resource method, a Netty handler's `channelRead`); else the thread's first application
//! method.
//!
//! The rule reads a branch's frames oldest first ([`EntryRule::find`]):
//!
//! 1. A method named in `entry-points` is an entry whenever it is on the stack: the oldest one
//!    named wins, over the rules below.
//! 2. Otherwise the entry is the first *application* frame after the newest *dispatch*:
//!    - the start of the thread is a dispatch (so without another, the entry is the thread's
//!      first application method);
//!    - a frame of [`DISPATCH`] is one: a framework calling the code it routes work to (the
//!      servlet container calling a servlet or filter, Spring's handler invocation, Netty's
//!      handler invocation, an executor running a task);
//!    - an application frame calling application code through *glue* (reflection, a method
//!      handle, a generated class: a lambda's `$$Lambda` class, a `$Proxy`, a CGLIB proxy) is
//!      one: a router of the application's own that calls its handlers by reflection or through
//!      method references. Glue called from the JDK or a framework (a stream calling a lambda,
//!      a JSON library calling a getter) is not: the handler that started the stream stays the
//!      entry.
//!
//!    A dispatch with no application frame after it leaves the entry found before it.
//! 3. Application frames are those of the `methods-filtering-prefix` prefixes (as plain text,
//!    as the app file keeps them); without prefixes, every Java frame outside [`FRAMEWORKS`].
//!    Glue and pseudo-frames (`[GC]`, `[unknown]`) are never application frames, so never an
//!    entry. A branch with no application frame has no entry.

use crate::config::Config;

/// The frames that dispatch work to the code after them (exact names, or prefixes ending in
/// `.`/`$` or a method name's start, matched as plain text).
pub const DISPATCH: &[&str] = &[
    // Threads and executors
    "java.lang.Thread.run",
    "java.lang.VirtualThread.run",
    "java.util.concurrent.ThreadPoolExecutor.runWorker",
    "java.util.concurrent.FutureTask.run",
    "java.util.concurrent.ForkJoinTask.doExec",
    // Servlet containers (Tomcat, Jetty, Undertow): filters and servlets
    "jakarta.servlet.http.HttpServlet.service",
    "javax.servlet.http.HttpServlet.service",
    "org.apache.catalina.core.ApplicationFilterChain.internalDoFilter",
    // Spring MVC and WebMvc.fn
    "org.springframework.web.method.support.InvocableHandlerMethod.doInvoke",
    "org.springframework.web.servlet.function.support.HandlerFunctionAdapter.handle",
    // JAX-RS: Jersey, RESTEasy
    "org.glassfish.jersey.server.model.internal.AbstractJavaResourceMethodDispatcher.invoke",
    "org.jboss.resteasy.core.MethodInjectorImpl.invoke",
    // Netty: the pipeline calling a handler (invokeChannelRead, invokeChannelActive, ...)
    "io.netty.channel.AbstractChannelHandlerContext.invoke",
];

/// The packages of the JDK and of common frameworks and libraries: without
/// `methods-filtering-prefix`, a frame of none of them is an application frame.
pub const FRAMEWORKS: &[&str] = &[
    "java.",
    "javax.",
    "jakarta.",
    "jdk.",
    "sun.",
    "com.sun.",
    "org.apache.",
    "org.springframework.",
    "org.glassfish.",
    "org.jboss.",
    "org.eclipse.jetty.",
    "org.hibernate.",
    "org.slf4j.",
    "ch.qos.logback.",
    "com.fasterxml.jackson.",
    "io.netty.",
    "io.undertow.",
    "io.micronaut.",
    "io.quarkus.",
    "io.vertx.",
    "io.helidon.",
    "reactor.",
    "kotlin.",
    "kotlinx.",
    "scala.",
];

/// The packages of reflection and method handles: glue between a caller and the method it calls.
const GLUE_PACKAGES: &[&str] = &[
    "java.lang.reflect.",
    "java.lang.invoke.",
    "jdk.internal.reflect.",
    "sun.reflect.",
    "jdk.proxy",
    "com.sun.proxy.",
];

/// How the rule sees a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Dispatches to the code after it ([`DISPATCH`]).
    Dispatch,
    /// Reflection, a method handle, a generated class.
    Glue,
    /// The application's.
    App,
    /// The JDK's, a framework's, a pseudo-frame.
    Other,
}

/// The entry of a branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The entry's method, `package.Class.method`.
    pub method: &'a str,
    /// The branch from the entry on: the entry's frame and the newer ones.
    pub stack: &'a str,
}

/// The rule, with the settings it reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryRule {
    /// `methods-filtering-prefix`: empty means every frame outside [`FRAMEWORKS`].
    prefixes: Vec<String>,
    /// `entry-points`: methods that are entries whenever they are on the stack.
    entry_points: Vec<String>,
}

impl EntryRule {
    /// The rule with the application's `prefixes` and the `entry_points` named (blank items
    /// ignored).
    pub fn new<S: AsRef<str>>(prefixes: &[S], entry_points: &[S]) -> EntryRule {
        let kept = |items: &[S]| {
            items
                .iter()
                .map(|item| item.as_ref().trim())
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect()
        };
        EntryRule {
            prefixes: kept(prefixes),
            entry_points: kept(entry_points),
        }
    }

    /// The rule of a configuration: its `methods-filtering-prefix` and `entry-points`.
    pub fn of(config: &Config) -> EntryRule {
        EntryRule::new(&config.methods_filtering_prefix, &config.entry_points)
    }

    /// The entry of `branch` (frames oldest first, joined by `;`), or `None` when it has no
    /// application frame.
    pub fn find<'a>(&self, branch: &'a str) -> Option<Entry<'a>> {
        let mut frames = Vec::new();
        let mut start = 0;
        for frame in branch.split(';') {
            frames.push((start, frame));
            start += frame.len() + 1;
        }
        let index = self.entry_index(frames.iter().map(|(_, frame)| *frame))?;
        let (start, method) = frames[index];
        Some(Entry {
            method,
            stack: &branch[start..],
        })
    }

    /// The index of the entry among `frames`, oldest first.
    fn entry_index<'a>(&self, frames: impl Iterator<Item = &'a str> + Clone) -> Option<usize> {
        if let Some(named) = frames
            .clone()
            .position(|frame| self.entry_points.iter().any(|point| point == frame))
        {
            return Some(named);
        }
        let mut entry = None;
        let mut armed = true;
        let mut after_app = false;
        for (index, frame) in frames.enumerate() {
            let kind = self.kind(frame);
            match kind {
                Kind::Dispatch => armed = true,
                Kind::Glue => armed |= after_app,
                Kind::App if armed => {
                    entry = Some(index);
                    armed = false;
                }
                Kind::App | Kind::Other => {}
            }
            after_app = kind == Kind::App;
        }
        entry
    }

    /// How the rule sees `frame`.
    fn kind(&self, frame: &str) -> Kind {
        if frame.is_empty() || frame.starts_with('[') {
            return Kind::Other;
        }
        if DISPATCH.iter().any(|dispatch| frame.starts_with(dispatch)) {
            return Kind::Dispatch;
        }
        let class = frame.rsplit_once('.').map_or(frame, |(class, _)| class);
        let simple = class.rsplit_once('.').map_or(class, |(_, simple)| simple);
        if class.contains("$$")
            || simple.starts_with("$Proxy")
            || GLUE_PACKAGES
                .iter()
                .any(|package| frame.starts_with(package))
        {
            return Kind::Glue;
        }
        let app = if self.prefixes.is_empty() {
            !FRAMEWORKS.iter().any(|package| frame.starts_with(package))
        } else {
            self.prefixes.iter().any(|prefix| frame.starts_with(prefix))
        };
        if app {
            Kind::App
        } else {
            Kind::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry's method of the branch whose frames are `frames`, oldest first.
    fn entry(rule: &EntryRule, frames: &[&str]) -> Option<String> {
        rule.find(&frames.join(";"))
            .map(|entry| entry.method.to_owned())
    }

    fn app(prefixes: &[&str]) -> EntryRule {
        EntryRule::new(prefixes, &[])
    }

    /// A Tomcat 10 worker thread up to the filter chain, as JFR shows it.
    const TOMCAT: &[&str] = &[
        "java.lang.Thread.run",
        "org.apache.tomcat.util.threads.TaskThread$WrappingRunnable.run",
        "org.apache.tomcat.util.threads.ThreadPoolExecutor$Worker.run",
        "org.apache.tomcat.util.threads.ThreadPoolExecutor.runWorker",
        "org.apache.tomcat.util.net.SocketProcessorBase.run",
        "org.apache.tomcat.util.net.NioEndpoint$SocketProcessor.doRun",
        "org.apache.coyote.AbstractProtocol$ConnectionHandler.process",
        "org.apache.coyote.http11.Http11Processor.service",
        "org.apache.catalina.connector.CoyoteAdapter.service",
        "org.apache.catalina.core.StandardEngineValve.invoke",
        "org.apache.catalina.core.StandardWrapperValve.invoke",
        "org.apache.catalina.core.ApplicationFilterChain.doFilter",
        "org.apache.catalina.core.ApplicationFilterChain.internalDoFilter",
    ];

    fn tomcat(rest: &[&'static str]) -> Vec<&'static str> {
        TOMCAT.iter().chain(rest).copied().collect()
    }

    #[test]
    fn a_servlet_is_the_entry_of_its_request_with_or_without_prefixes() {
        let branch = tomcat(&[
            "jakarta.servlet.http.HttpServlet.service",
            "jakarta.servlet.http.HttpServlet.service",
            "HelloWorldExample.doGet",
            "java.io.PrintWriter.println",
        ]);
        for rule in [app(&[]), app(&["Hello"])] {
            assert_eq!(
                entry(&rule, &branch).as_deref(),
                Some("HelloWorldExample.doGet")
            );
        }
        let joined = branch.join(";");
        let found = app(&[]).find(&joined).unwrap();
        assert_eq!(
            found.stack,
            "HelloWorldExample.doGet;java.io.PrintWriter.println"
        );
    }

    #[test]
    fn a_filter_of_the_application_is_the_entry_of_its_own_work_only() {
        let filter = "com.shop.AuditFilter.doFilter";
        let in_filter = tomcat(&[filter, "com.shop.AuditFilter.log"]);
        assert_eq!(entry(&app(&[]), &in_filter).as_deref(), Some(filter));
        let in_servlet = tomcat(&[
            filter,
            "org.apache.catalina.core.ApplicationFilterChain.doFilter",
            "org.apache.catalina.core.ApplicationFilterChain.internalDoFilter",
            "com.shop.CartServlet.service",
            "com.shop.Cart.total",
        ]);
        assert_eq!(
            entry(&app(&[]), &in_servlet).as_deref(),
            Some("com.shop.CartServlet.service")
        );
        // A servlet of the container's own (the default servlet): the filter stays the entry.
        let static_file = tomcat(&[
            filter,
            "org.apache.catalina.core.ApplicationFilterChain.doFilter",
            "org.apache.catalina.core.ApplicationFilterChain.internalDoFilter",
            "jakarta.servlet.http.HttpServlet.service",
            "org.apache.catalina.servlets.DefaultServlet.doGet",
        ]);
        assert_eq!(entry(&app(&[]), &static_file).as_deref(), Some(filter));
    }

    #[test]
    fn a_spring_controller_called_by_reflection_is_the_entry() {
        let mut branch = tomcat(&[
            "jakarta.servlet.http.HttpServlet.service",
            "org.springframework.web.servlet.FrameworkServlet.service",
            "org.springframework.web.servlet.DispatcherServlet.doDispatch",
            "org.springframework.web.servlet.mvc.method.annotation.ServletInvocableHandlerMethod.invokeAndHandle",
            "org.springframework.web.method.support.InvocableHandlerMethod.invokeForRequest",
            "org.springframework.web.method.support.InvocableHandlerMethod.doInvoke",
            "java.lang.reflect.Method.invoke",
            "jdk.internal.reflect.DirectMethodHandleAccessor.invoke",
            "jdk.internal.reflect.DirectMethodHandleAccessor.invokeImpl",
            "com.shop.web.OrderController$$SpringCGLIB$$0.place",
        ]);
        branch.extend([
            "com.shop.web.OrderController.place",
            "com.shop.Orders.price",
        ]);
        for rule in [app(&[]), app(&["com.shop"])] {
            assert_eq!(
                entry(&rule, &branch).as_deref(),
                Some("com.shop.web.OrderController.place")
            );
        }
    }

    #[test]
    fn a_router_of_the_application_gives_way_to_the_handlers_it_calls() {
        let rule = app(&["com.acme"]);
        let head = [
            "java.lang.Thread.run",
            "com.acme.Server.loop",
            "com.acme.Router.route",
        ];
        let by = |glue: &[&'static str], handler: &'static str| -> Option<String> {
            let frames: Vec<&str> = head
                .iter()
                .chain(glue)
                .chain(&[handler, "com.acme.Work.spin"])
                .copied()
                .collect();
            entry(&rule, &frames)
        };
        // JDK 21 and 25: method handles behind Method.invoke
        let direct = [
            "java.lang.reflect.Method.invoke",
            "jdk.internal.reflect.DirectMethodHandleAccessor.invoke",
            "jdk.internal.reflect.DirectMethodHandleAccessor.invokeImpl",
            "java.lang.invoke.LambdaForm$MH/0x00007f0c1c00c400.invoke",
            "java.lang.invoke.DirectMethodHandle$Holder.invokeVirtual",
        ];
        // JDK 17: the native accessor, then a generated one
        let native = [
            "java.lang.reflect.Method.invoke",
            "jdk.internal.reflect.DelegatingMethodAccessorImpl.invoke",
            "jdk.internal.reflect.NativeMethodAccessorImpl.invoke",
            "jdk.internal.reflect.NativeMethodAccessorImpl.invoke0",
        ];
        let generated = [
            "java.lang.reflect.Method.invoke",
            "jdk.internal.reflect.GeneratedMethodAccessor3.invoke",
        ];
        let lambda = ["com.acme.Main$$Lambda/0x000000080100a218.handle"];
        let lambda_17 = ["com.acme.Main$$Lambda$14/0x0000000801001a00.handle"];
        for glue in [&direct[..], &native, &generated, &lambda, &lambda_17] {
            assert_eq!(
                by(glue, "com.acme.Orders.handle").as_deref(),
                Some("com.acme.Orders.handle"),
                "{glue:?}"
            );
        }
        // A lambda's body is a method of the class it is written in: that is the entry.
        assert_eq!(
            by(&lambda, "com.acme.Main.lambda$main$0").as_deref(),
            Some("com.acme.Main.lambda$main$0")
        );
        // A plain call is no dispatch: the thread's first application method stays the entry.
        assert_eq!(
            by(&[], "com.acme.Orders.handle").as_deref(),
            Some("com.acme.Server.loop")
        );
    }

    #[test]
    fn lambdas_and_reflection_called_by_the_jdk_or_a_library_are_no_dispatch() {
        let rule = app(&["com.acme"]);
        let stream = [
            "com.acme.Main.main",
            "com.acme.Report.build",
            "java.util.stream.ReferencePipeline.collect",
            "java.util.stream.ReferencePipeline$3$1.accept",
            "com.acme.Report$$Lambda/0x000000080100b000.apply",
            "com.acme.Report.lambda$build$0",
        ];
        assert_eq!(entry(&rule, &stream).as_deref(), Some("com.acme.Main.main"));
        let json = [
            "java.lang.Thread.run",
            "com.acme.Api.get",
            "com.fasterxml.jackson.databind.ObjectMapper.writeValueAsString",
            "com.fasterxml.jackson.databind.ser.BeanPropertyWriter.serializeAsField",
            "java.lang.reflect.Method.invoke",
            "jdk.internal.reflect.DirectMethodHandleAccessor.invoke",
            "com.acme.Order.getTotal",
        ];
        for rule in [rule, app(&[])] {
            assert_eq!(entry(&rule, &json).as_deref(), Some("com.acme.Api.get"));
        }
    }

    #[test]
    fn a_netty_handler_is_the_entry_of_what_it_reads() {
        let branch = [
            "java.lang.Thread.run",
            "io.netty.util.concurrent.FastThreadLocalRunnable.run",
            "io.netty.util.internal.ThreadExecutorMap$2.run",
            "io.netty.util.concurrent.SingleThreadEventExecutor$4.run",
            "io.netty.channel.nio.NioEventLoop.run",
            "io.netty.channel.nio.NioEventLoop.processSelectedKeys",
            "io.netty.channel.nio.AbstractNioByteChannel$NioByteUnsafe.read",
            "io.netty.channel.DefaultChannelPipeline.fireChannelRead",
            "io.netty.channel.AbstractChannelHandlerContext.invokeChannelRead",
            "io.netty.handler.codec.ByteToMessageDecoder.channelRead",
            "io.netty.channel.AbstractChannelHandlerContext.fireChannelRead",
            "io.netty.channel.AbstractChannelHandlerContext.invokeChannelRead",
            "io.netty.channel.SimpleChannelInboundHandler.channelRead",
            "org.example.EchoHandler.channelRead0",
            "org.example.Codec.encode",
        ];
        for rule in [app(&[]), app(&["org.example"])] {
            assert_eq!(
                entry(&rule, &branch).as_deref(),
                Some("org.example.EchoHandler.channelRead0")
            );
        }
    }

    #[test]
    fn an_executors_task_and_a_plain_thread_start_their_work() {
        let task = [
            "java.lang.Thread.run",
            "java.util.concurrent.ThreadPoolExecutor$Worker.run",
            "java.util.concurrent.ThreadPoolExecutor.runWorker",
            "java.util.concurrent.FutureTask.run",
            "java.util.concurrent.Executors$RunnableAdapter.call",
            "org.example.Batch$$Lambda/0x0000000801003000.run",
            "org.example.Batch.lambda$submit$0",
            "org.example.Batch.sum",
        ];
        assert_eq!(
            entry(&app(&[]), &task).as_deref(),
            Some("org.example.Batch.lambda$submit$0")
        );
        let main = [
            "org.example.Main.main",
            "org.example.Main.work",
            "java.util.HashMap.put",
        ];
        assert_eq!(
            entry(&app(&[]), &main).as_deref(),
            Some("org.example.Main.main")
        );
        let thread = ["org.example.Poller.run", "org.example.Poller.poll"];
        assert_eq!(
            entry(&app(&[]), &thread).as_deref(),
            Some("org.example.Poller.run")
        );
    }

    #[test]
    fn a_branch_without_an_application_frame_has_no_entry() {
        for frames in [
            &["[GC]"][..],
            &[
                "java.lang.Thread.run",
                "java.lang.ref.Reference$ReferenceHandler.run",
            ],
            &[
                "java.lang.Thread.run",
                "[unknown]",
                "jdk.internal.misc.Unsafe.park",
            ],
            &["com.other.Main.main", "com.other.Main.work"],
        ] {
            assert_eq!(entry(&app(&["org.example"]), frames), None, "{frames:?}");
        }
        assert_eq!(entry(&app(&[]), &["[GC]"]), None);
        let tomcat_alone = tomcat(&["org.apache.juli.logging.DirectJDKLog.isTraceEnabled"]);
        assert_eq!(entry(&app(&[]), &tomcat_alone), None, "Tomcat's logging");
        assert_eq!(app(&[]).find(""), None);
    }

    #[test]
    fn a_method_named_in_entry_points_wins_the_oldest_first() {
        let branch = tomcat(&[
            "jakarta.servlet.http.HttpServlet.service",
            "com.acme.Front.doGet",
            "com.acme.Router.route",
            "java.lang.reflect.Method.invoke",
            "com.acme.Orders.handle",
            "com.acme.Tx.run",
        ]);
        let named = |points: &[&str]| entry(&EntryRule::new(&["com.acme"], points), &branch);
        assert_eq!(named(&[]).as_deref(), Some("com.acme.Orders.handle"));
        assert_eq!(
            named(&["com.acme.Router.route"]).as_deref(),
            Some("com.acme.Router.route")
        );
        assert_eq!(
            named(&["com.acme.Tx.run", " com.acme.Router.route "]).as_deref(),
            Some("com.acme.Router.route"),
            "the oldest named, trimmed"
        );
        // Named, a method outside the application is an entry too.
        assert_eq!(
            named(&["org.apache.coyote.http11.Http11Processor.service", ""]).as_deref(),
            Some("org.apache.coyote.http11.Http11Processor.service")
        );
        assert_eq!(
            named(&["com.acme.Absent.run"]).as_deref(),
            Some("com.acme.Orders.handle")
        );
    }

    #[test]
    fn the_rule_reads_its_settings_from_the_configuration() {
        let mut config = Config::default();
        let log = crate::log::Recorded::default();
        config.set("entry-points", " a.B.c , ,d.E.f", &log).unwrap();
        config.set("methods-filtering-prefix", "a.", &log).unwrap();
        assert_eq!(config.entry_points, ["a.B.c", "d.E.f"]);
        assert_eq!(
            EntryRule::of(&config),
            EntryRule::new(&["a."], &["a.B.c", "d.E.f"])
        );
        assert!(config
            .settings()
            .contains(&("entry-points", "a.B.c,d.E.f".to_owned())));
    }
}
