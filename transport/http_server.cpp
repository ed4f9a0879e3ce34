// http_server.cpp: the Beast server (http_server.hpp). Each connection runs one coroutine on
// its own strand; writers on other threads enqueue work and wake it by cancelling a timer
// through the strand, so no socket is ever touched off the strand.
#include <utility> // before Boost.Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include "transport/http_server.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/resource.h>

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/log.hpp"
#include "transport/cors.hpp"

namespace troupe::transport {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string_view http_reason(int status) {
  const auto r = http::obsolete_reason(static_cast<http::status>(status));
  return std::string_view(r.data(), r.size());
}

namespace {

struct item {
  enum kind_t { full, stream_start, data, stream_end } kind;
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Shared between a connection coroutine and the writer the handler holds.
struct exchange : std::enable_shared_from_this<exchange> {
  explicit exchange(asio::any_io_executor s)
      : ex(s)
      , wake(s) {
    wake.expires_at(asio::steady_timer::time_point::max());
  }
  asio::any_io_executor ex; // the connection's strand
  asio::steady_timer wake;
  std::mutex mu;
  std::deque<item> queue;
  bool client_gone = false;
  bool complete = false;
  std::function<void()> close_cb;

  void push(item it) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (client_gone || complete) return;
      if (it.kind == item::full || it.kind == item::stream_end) complete = true;
      queue.push_back(std::move(it));
    }
    asio::post(ex, [self = shared_from_this()] { self->wake.cancel(); });
  }
  void gone() {
    std::function<void()> cb;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (client_gone) return;
      client_gone = true;
      if (!complete) cb = std::move(close_cb);
    }
    if (cb) cb();
  }
};

class writer final : public response_writer {
 public:
  explicit writer(std::shared_ptr<exchange> x)
      : x_(std::move(x)) {}
  void respond(int status, const std::string& ct, std::string body,
               std::vector<std::pair<std::string, std::string>> headers) override {
    x_->push({item::full, status, ct, std::move(body), std::move(headers)});
  }
  void start_stream(int status, const std::string& ct) override {
    x_->push({item::stream_start, status, ct, {}, {}});
  }
  void chunk(std::string d) override {
    if (!d.empty()) x_->push({item::data, 0, {}, std::move(d), {}});
  }
  void end() override { x_->push({item::stream_end, 0, {}, {}, {}}); }
  bool closed() const override {
    std::lock_guard<std::mutex> lk(x_->mu);
    return x_->client_gone;
  }
  void on_close(std::function<void()> f) override {
    bool now = false;
    {
      std::lock_guard<std::mutex> lk(x_->mu);
      if (x_->client_gone && !x_->complete)
        now = true;
      else
        x_->close_cb = f;
    }
    if (now) f();
  }

 private:
  std::shared_ptr<exchange> x_;
};

} // namespace

struct http_server::impl {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  http_handler handler;
  http_limits limits;
  cors_policy cors;
  std::atomic<size_t> connections{0}, in_progress{0};
  std::atomic<int64_t> accept_failures{0};
  std::atomic<bool> accepting{true};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve(tcp::socket sock);
};

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

asio::awaitable<void> write_simple(beast::tcp_stream& stream, int status, const std::string& text,
                                   bool close, const header_list& extra = {}) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "troupe");
  for (const auto& [k, v] : extra) res.set(k, v);
  res.body() = text;
  res.keep_alive(!close);
  if (status == 503) res.set(http::field::retry_after, "1");
  res.prepare_payload();
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(10));
  co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
}

// After an answer that closes the connection early (413): stop sending, then read and drop
// what the client still sends, up to a bound in bytes and time, before closing, so its
// kernel does not answer our close with a reset that loses the response.
asio::awaitable<void> linger_discard(beast::tcp_stream& stream) {
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  constexpr size_t max_discard = 64u << 20;
  char tmp[16384];
  size_t total = 0;
  stream.expires_after(std::chrono::seconds(5));
  while (total < max_discard) {
    const size_t n = co_await stream.async_read_some(asio::buffer(tmp),
                                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    total += n;
  }
}

std::string error_json(const std::string& message, const std::string& type) {
  std::string m;
  for (char c : message) {
    if (c == '"' || c == '\\') m += '\\';
    m += c;
  }
  return "{\"error\":{\"message\":\"" + m + "\",\"type\":\"" + type +
         "\",\"param\":null,\"code\":null}}";
}

// What a connection's watcher and its serve() loop share; both run on the connection's
// strand, so plain fields.
struct watch_state {
  watch_state(asio::any_io_executor ex, bool eof_is_gone_)
      : eof_is_gone(eof_is_gone_)
      , exited(ex) {
    exited.expires_at(asio::steady_timer::time_point::max());
  }
  std::string spill;         // bytes read past the request (the next pipelined request's)
  bool eof_is_gone;          // the end of the client's input means it gave up (see serve())
  bool eof = false;          // the client's input ended (no further request will come)
  bool finished = false;     // the response is written: stop at the next completion
  bool done = false;         // the watcher has returned
  asio::steady_timer exited; // cancelled when it returns
};

// Reads from the socket while a response is being produced: pipelined bytes are kept; an
// error means the client is gone, and so does EOF unless w->eof_is_gone is false (then the
// client only half-closed: the answer is still written, and the connection ends after it).
// It stops as soon as a read completes after the
// response is finished, and says so (serve() waits for that before it reads the socket
// itself: a read that had already taken the next request's bytes when serve() cancelled it
// would otherwise complete later, after serve() took an empty spill, and keep them).
asio::awaitable<void> watch(tcp::socket& sock, std::shared_ptr<exchange> x,
                            std::shared_ptr<watch_state> w) {
  char tmp[4096];
  for (;;) {
    beast::error_code ec;
    const size_t n = co_await sock.async_read_some(asio::buffer(tmp),
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) w->spill.append(tmp, n);
    const bool flood = w->spill.size() > (1u << 20); // a client flooding us mid-response
    const bool eof = ec == asio::error::eof;
    if (eof) w->eof = true;
    if ((ec || flood) && !w->finished && (!eof || w->eof_is_gone)) x->gone();
    if (ec || flood || w->finished) {
      x->wake.cancel();
      break;
    }
  }
  w->done = true;
  w->exited.cancel();
}

} // namespace

asio::awaitable<void> http_server::impl::accept_loop() {
  // A failed accept (out of file descriptors, above all) is retried after a pause that
  // doubles up to half a second, and logged once per 5 s with the count in between, so a
  // server at its descriptor limit neither spins nor floods its log.
  auto pause = std::chrono::milliseconds(0);
  auto last_log = std::chrono::steady_clock::time_point{};
  int64_t unlogged = 0;
  asio::steady_timer backoff(ioc);
  while (accepting.load()) {
    beast::error_code ec;
    tcp::socket sock = co_await acceptor.async_accept(
        asio::make_strand(ioc), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (!accepting.load() || ec == asio::error::operation_aborted) co_return;
      ++accept_failures;
      ++unlogged;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_log > std::chrono::seconds(5)) {
        TROUPE_LOG_WARN("http",
                        "accept failed: {} ({} times since the last report; {} open "
                        "connections); retrying with backoff",
                        ec.message(), unlogged, connections.load());
        last_log = now;
        unlogged = 0;
      }
      pause = std::min(std::chrono::milliseconds(500),
                       std::max(std::chrono::milliseconds(5), pause * 2));
      backoff.expires_after(pause);
      beast::error_code tec;
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, tec));
      continue;
    }
    pause = std::chrono::milliseconds(0);
    auto ex = sock.get_executor();
    asio::co_spawn(ex, serve(std::move(sock)), asio::detached);
  }
}

asio::awaitable<void> http_server::impl::serve(tcp::socket sock) {
  ++connections;
  struct guard {
    std::atomic<size_t>& n;
    ~guard() { --n; }
  } g{connections};
  auto ex = sock.get_executor(); // a strand: accept_loop made it so
  beast::tcp_stream stream(std::move(sock));
  beast::flat_buffer buf;
  if (connections.load() > limits.max_connections) {
    co_await write_simple(stream, 503, error_json("too many connections", "server_error"), true);
    co_return;
  }
  std::string remote;
  {
    beast::error_code ec;
    auto ep = stream.socket().remote_endpoint(ec);
    if (!ec) remote = ep.address().to_string();
  }
  for (;;) {
    beast::error_code ec;
    if (buf.size() == 0) { // idle keep-alive: wait for the first byte of the next request
      stream.expires_after(
          std::chrono::milliseconds(static_cast<int64_t>(limits.idle_timeout_s * 1000)));
      const size_t n = co_await stream.async_read_some(
          buf.prepare(4096), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      buf.commit(n);
    }
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_body_bytes);
    // the whole request within read_timeout_s: a timer of our own cancels the reads (the
    // stream's own expiry would close the socket, and no 408 could be written). Its state
    // outlives this frame: once disarmed (the reads over), a late firing touches nothing.
    struct deadline_state {
      bool armed = true, fired = false;
    };
    auto dl = std::make_shared<deadline_state>();
    stream.expires_never();
    asio::steady_timer deadline(ex);
    deadline.expires_after(
        std::chrono::milliseconds(static_cast<int64_t>(limits.read_timeout_s * 1000)));
    deadline.async_wait([dl, &stream](const beast::error_code& e) {
      if (e || !dl->armed) return;
      dl->fired = true;
      beast::error_code ignored;
      stream.socket().cancel(ignored);
    });
    struct disarm { // whichever way this iteration ends, before the stream can go
      std::shared_ptr<deadline_state> s;
      ~disarm() { s->armed = false; }
    } disarm_dl{dl};
    co_await http::async_read_header(stream, buf, parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
    // the CORS headers of the server's own early answers (400, 408, 413, 431), from the request's
    // fields parsed so far: a browser page then reads the refusal instead of a network error
    auto early_cors = [&]() -> header_list {
      if (!cors.enabled()) return {};
      std::map<std::string, std::string> h;
      if (auto it = parser.get().find(http::field::origin); it != parser.get().end())
        h["origin"] = std::string(it->value());
      return cors.response_headers(h);
    };
    auto too_big = [&]() -> asio::awaitable<void> {
      // answer 413, then read and discard what the client is still sending (bounded), so it
      // receives the answer instead of a reset connection
      dl->armed = false;
      co_await write_simple(
          stream, 413,
          error_json(fmt::format("request body exceeds {} bytes", limits.max_body_bytes),
                     "invalid_request_error"),
          true, early_cors());
      co_await linger_discard(stream);
    };
    if (!ec) {
      const auto& head = parser.get();
      if (auto n = parser.content_length(); n && *n > limits.max_body_bytes) {
        co_await too_big(); // said so up front: no need to read the body at all
        co_return;
      }
      // a client that asked to be told before sending the body (curl does for large bodies)
      if (auto it = head.find(http::field::expect);
          it != head.end() && beast::iequals(it->value(), "100-continue")) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        beast::error_code wec;
        co_await asio::async_write(stream, asio::buffer(cont, sizeof(cont) - 1),
                                   asio::redirect_error(asio::use_awaitable, wec));
        if (wec) co_return;
      }
      co_await http::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
    }
    dl->armed = false;
    deadline.cancel();
    if (dl->fired) { // started, not finished in time (a stalled or trickling client)
      co_await write_simple(
          stream, 408,
          error_json(fmt::format("the request did not arrive within {} s", limits.read_timeout_s),
                     "invalid_request_error"),
          true, early_cors());
      co_await linger_discard(stream);
      co_return;
    }
    if (ec == http::error::body_limit) {
      co_await too_big();
      co_return;
    }
    if (ec == http::error::header_limit) {
      co_await write_simple(
          stream, 431,
          error_json(fmt::format("request headers exceed {} bytes", limits.max_header_bytes),
                     "invalid_request_error"),
          true, early_cors());
      co_await linger_discard(stream); // as after a 413: the client receives the answer
      co_return;
    }
    if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
      co_return;
    if (ec) {
      co_await write_simple(
          stream, 400,
          error_json("malformed HTTP request: " + ec.message(), "invalid_request_error"), true,
          early_cors());
      co_return;
    }
    stream.expires_never();
    auto req = parser.release();
    http_request r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    for (const auto& f : req)
      r.headers[lower(std::string(f.name_string()))] = std::string(f.value());
    r.body = std::move(req.body());
    r.remote = remote;
    // an HTTP/1.0 client knows no chunked encoding: a stream's body is delimited by the close
    const bool http10 = req.version() < 11;
    const bool keep_alive = req.keep_alive();
    const bool head_only = req.method() == http::verb::head;
    bool closes = !keep_alive; // after this response
    const header_list cors_headers = cors.response_headers(r.headers);
    if (cors.enabled() && cors_policy::is_preflight(r.method, r.headers)) {
      // answered here, before authentication and routing; an origin not allowed falls through
      // to the handler, which refuses OPTIONS
      if (auto h = cors.preflight_headers(r.headers); !h.empty()) {
        http::response<http::empty_body> res{http::status::no_content, 11};
        res.set(http::field::server, "troupe");
        for (auto& [k, v] : h) res.set(k, v);
        res.keep_alive(keep_alive);
        co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !keep_alive) co_return;
        continue;
      }
    }

    auto x = std::make_shared<exchange>(ex);
    // A client that half-closes after its request (nc -N, some health checkers) cannot be told
    // from one that closed for good until a write fails, so the end of its input is taken as
    // the client giving up (as Go's server and uvicorn take it) where that saves work, a
    // generation (POST), and not where answering costs nothing (GET, HEAD).
    const bool cheap = req.method() == http::verb::get || req.method() == http::verb::head;
    auto w = std::make_shared<watch_state>(ex, !cheap);
    ++in_progress;
    struct progress_guard {
      std::atomic<size_t>& n;
      ~progress_guard() { --n; }
    } pg{in_progress};
    // socket reads for the watcher happen on this coroutine's executor as well
    asio::co_spawn(ex, watch(stream.socket(), x, w), asio::detached);
    try {
      handler(std::move(r), std::make_shared<writer>(x));
    } catch (const std::exception& e) {
      TROUPE_LOG_ERROR("http", "handler threw: {}", e.what());
      x->push(
          {item::full, 500, "application/json", error_json("internal error", "server_error"), {}});
    }
    bool done = false, broken = false;
    std::optional<http::response<http::empty_body>> head;
    std::optional<http::response_serializer<http::empty_body>> sr;
    while (!done && !broken) {
      std::deque<item> batch;
      bool gone;
      {
        std::lock_guard<std::mutex> lk(x->mu);
        batch.swap(x->queue);
        gone = x->client_gone;
      }
      if (gone) {
        broken = true;
        break;
      }
      if (batch.empty()) {
        x->wake.expires_at(asio::steady_timer::time_point::max());
        beast::error_code wec;
        co_await x->wake.async_wait(asio::redirect_error(asio::use_awaitable, wec));
        continue;
      }
      for (auto& it : batch) {
        beast::error_code wec;
        switch (it.kind) {
        case item::full: {
          if (head_only) { // HEAD: the GET answer's header, Content-Length included, no body
            http::response<http::empty_body> res{static_cast<http::status>(it.status), 11};
            res.set(http::field::server, "troupe");
            res.set(http::field::content_type, it.content_type);
            for (auto& [k, v] : it.headers) res.set(k, v);
            for (auto& [k, v] : cors_headers) res.set(k, v);
            res.content_length(it.body.size());
            res.keep_alive(keep_alive);
            http::response_serializer<http::empty_body> hs(res);
            co_await http::async_write_header(stream, hs,
                                              asio::redirect_error(asio::use_awaitable, wec));
            done = true;
            break;
          }
          http::response<http::string_body> res{static_cast<http::status>(it.status), 11};
          res.set(http::field::server, "troupe");
          res.set(http::field::content_type, it.content_type);
          for (auto& [k, v] : it.headers) res.set(k, v);
          for (auto& [k, v] : cors_headers) res.set(k, v);
          res.body() = std::move(it.body);
          res.keep_alive(keep_alive);
          res.prepare_payload();
          co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, wec));
          done = true;
          break;
        }
        case item::stream_start: {
          head.emplace(static_cast<http::status>(it.status), 11);
          head->set(http::field::server, "troupe");
          head->set(http::field::content_type, it.content_type);
          head->set(http::field::cache_control, "no-cache");
          for (auto& [k, v] : cors_headers) head->set(k, v);
          if (http10) closes = true;
          head->keep_alive(!closes);
          head->chunked(!http10);
          sr.emplace(*head);
          co_await http::async_write_header(stream, *sr,
                                            asio::redirect_error(asio::use_awaitable, wec));
          break;
        }
        case item::data:
          if (http10)
            co_await asio::async_write(stream, asio::buffer(it.body),
                                       asio::redirect_error(asio::use_awaitable, wec));
          else
            co_await asio::async_write(stream, http::make_chunk(asio::buffer(it.body)),
                                       asio::redirect_error(asio::use_awaitable, wec));
          break;
        case item::stream_end:
          if (!http10)
            co_await asio::async_write(stream, http::make_chunk_last(),
                                       asio::redirect_error(asio::use_awaitable, wec));
          done = true;
          break;
        }
        if (wec) {
          x->gone();
          broken = true;
          break;
        }
        if (done) break;
      }
    }
    w->finished = true;
    {
      beast::error_code cec;
      stream.socket().cancel(cec); // ends the watcher's read (or it ends at its completion)
    }
    // the watcher returns before this coroutine touches the socket or the spill again
    while (!w->done) {
      beast::error_code tec;
      co_await w->exited.async_wait(asio::redirect_error(asio::use_awaitable, tec));
    }
    if (!broken && http10 && head) { // a body delimited by the close: let the client read it
      co_await linger_discard(stream);
      co_return;
    }
    if (broken || closes || w->eof) {
      beast::error_code sec;
      stream.socket().shutdown(tcp::socket::shutdown_both, sec);
      co_return;
    }
    if (!w->spill.empty()) { // pipelined bytes: the next request's
      auto dst = buf.prepare(w->spill.size());
      std::memcpy(dst.data(), w->spill.data(), w->spill.size());
      buf.commit(w->spill.size());
    }
  }
}

http_server::http_server(std::unique_ptr<impl> p)
    : impl_(std::move(p)) {}

expected<std::unique_ptr<http_server>> http_server::start(const std::string& host, uint16_t port,
                                                          http_handler handler,
                                                          http_limits limits) {
  auto p = std::make_unique<impl>();
  p->handler = std::move(handler);
  p->limits = limits;
  p->cors = cors_policy(limits.allowed_origins);
  beast::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec)
    return make_error(errc::invalid_argument, "bad listen address '{}': {}", host, ec.message());
  tcp::endpoint ep(addr, port);
  p->acceptor.open(ep.protocol(), ec);
  if (!ec) p->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) p->acceptor.bind(ep, ec);
  if (!ec) p->acceptor.listen(limits.backlog, ec);
  if (ec) return make_error(errc::io_error, "cannot listen on {}:{}: {}", host, port, ec.message());
  p->work.emplace(asio::make_work_guard(p->ioc));
  asio::co_spawn(p->ioc, p->accept_loop(), asio::detached);
  for (int i = 0; i < std::max(1, limits.threads); ++i)
    p->threads.emplace_back([ioc = &p->ioc] { ioc->run(); });
  return std::unique_ptr<http_server>(new http_server(std::move(p)));
}

http_server::~http_server() {
  shutdown();
}

uint16_t http_server::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void http_server::stop_accepting() {
  if (!impl_->accepting.exchange(false)) return;
  asio::post(impl_->ioc, [p = impl_.get()] {
    beast::error_code ec;
    p->acceptor.close(ec);
  });
}

bool http_server::drain(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (impl_->in_progress.load() > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void http_server::shutdown() {
  if (!impl_ || impl_->threads.empty()) return;
  stop_accepting();
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

int64_t http_server::accept_failures() const {
  return impl_->accept_failures.load();
}

std::pair<int64_t, int64_t> raise_open_file_limit(int64_t wanted) {
  struct rlimit rl {};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return {-1, -1};
  const auto hard = static_cast<int64_t>(rl.rlim_max == RLIM_INFINITY ? wanted : rl.rlim_max);
  if (static_cast<int64_t>(rl.rlim_cur) < wanted) {
    rl.rlim_cur = static_cast<rlim_t>(std::min(wanted, hard));
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
  }
  return {static_cast<int64_t>(rl.rlim_cur), hard};
}

size_t http_server::open_connections() const {
  return impl_->connections.load();
}
size_t http_server::responses_in_progress() const {
  return impl_->in_progress.load();
}

} // namespace troupe::transport
