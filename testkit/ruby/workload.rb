# A Ruby program for JRuby's own command line, the same work round after round (so that what a
# sampler sees does not depend on when it samples): objects and method calls, blocks, a hash of
# words, string building and sorting. Runs the rounds given as its argument.
class Account
  attr_reader :name, :balance

  def initialize(name, balance)
    @name = name
    @balance = balance
  end

  def deposit(amount)
    @balance += amount
    self
  end

  def <=>(other)
    balance <=> other.balance
  end
end

WORDS = %w[alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu].freeze

def round(seed)
  accounts = Array.new(300) { |i| Account.new("a#{i}", (i * seed) % 997) }
  2_000.times { |i| accounts[(i * 7) % 300].deposit(i % 13) }
  counts = Hash.new(0)
  text = Array.new(2_000) { |i| WORDS[(i * seed) % WORDS.size] }.join(' ')
  text.split(' ').each { |word| counts[word.upcase.reverse] += 1 }
  lines = accounts.sort.reverse.first(50).map { |a| format('%-6s %8d', a.name, a.balance) }
  lines.join("\n").scan(/\d+/).map(&:to_i).sum + counts.values.max
end

rounds = Integer(ARGV.fetch(0, '100'))
sum = 0
rounds.times { |r| sum += round(r + 1) }
puts sum
