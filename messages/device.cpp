#include "messages/device.hpp"

namespace swarmrt::messages {

std::string device_name_problem(const std::string& device) {
  if (device == "cpu" || device == "cuda") return "";
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() <= 9 &&
      device.find_first_not_of("0123456789", 5) == std::string::npos)
    return "";
  return "unknown device '" + device + "' (cpu, cuda or cuda:K)";
}

}  // namespace swarmrt::messages
