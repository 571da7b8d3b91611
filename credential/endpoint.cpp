#include "credential/endpoint.hpp"

#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "credential/credential.hpp"

namespace swarmrt::credential {

std::string host_port_text(const HostPort& at) {
  return at.host + ":" + std::to_string(at.port);
}

HostPort parse_host_port(const std::string& text, bool allow_zero) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("'" + text + "' is not HOST:PORT");
  HostPort out;
  out.host = text.substr(0, colon);
  const auto port_text = text.substr(colon + 1);
  if (port_text.find_first_not_of("0123456789") != std::string::npos || port_text.size() > 5)
    throw std::invalid_argument("'" + port_text + "' in '" + text + "' is not a port number");
  const long port = std::stol(port_text);
  if (port > 65535 || (port == 0 && !allow_zero))
    throw std::invalid_argument("port " + port_text + " in '" + text + "' is out of range");
  out.port = static_cast<uint16_t>(port);
  return out;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

bool tcp_port_open(const std::string& host, uint16_t port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    return false;
  bool open = false;
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      open = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      open = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
             err == 0;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return open;
}

std::string resolve_secret(const NetOptions& net) {
  if (!net.secret_on_command_line.empty())
    throw std::invalid_argument(
        "--secret is refused: a secret on a command line shows in every process list "
        "(ps, /proc); give it as --secret-file FILE or in SWARMRT_SECRET");
  if (!net.secret_file.empty()) {
    std::string warning;
    try {
      auto secret = read_secret_file(net.secret_file, &warning);
      if (!warning.empty()) spdlog::warn("{}", warning);
      return secret;
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
  }
  const char* env = std::getenv("SWARMRT_SECRET");
  return env ? env : "";
}

std::string run_dir_secret(const std::string& run_dir, bool keep) {
  const std::string path = (std::filesystem::path(run_dir) / "secret").string();
  if (keep && std::filesystem::exists(path)) return read_secret_file(path);
  auto secret = generate_secret();
  write_secret_file(path, secret);
  return secret;
}

}  // namespace swarmrt::credential
