"""Word lists that keep the cue-less name rule of :mod:`mimesis.data.pii_people` precise.

Hand-written for this project (no maintained package with these lists is importable here), and
extended at run time with faker's English lorem words, US states and country names:

- ``NOT_NAMES``: capitalised words that follow a first name in chat without being a surname
  (places, products, languages, organisations, generic nouns): "Jordan River", "Victoria Station",
  "Claude Sonnet", "Julia Language".
- ``NAME_WORDS``: names that the measured English word list of
  :mod:`mimesis.data.make_english_words` holds because ShareGPT writes them in lower case too.
- ``AMBIGUOUS_FIRST``: first names that are also everyday words, programming languages or
  assistants ("Will", "Mark", "Ruby", "Alexa"); they start a name only before a known surname
  and not at the start of a sentence.
- ``PUBLIC_FIGURES``: historical and public people, brands named after people and place names
  shaped like "First Last". Questions about them are ordinary content, not personal data, so the
  cue-less rule keeps them (a cue such as "my colleague" still replaces them).
"""

from __future__ import annotations

_NOT_NAMES = """
street road avenue lane drive station river lake mountain mount park bridge tower square hall
university college school academy institute hospital clinic church cathedral museum library
bank group company corporation inc ltd llc gmbh foundation trust fund council ministry
code model pro max plus ultra mini air studio cloud server data learning language languages
rails notebook notebooks framework api sdk app apps web online mobile desktop edition
falls beach bay island islands valley canyon coast harbour harbor airport terminal line
street's opera festival awards award prize cup league series season episode chapter
sonnet opus haiku instant turbo flash lite vision code's gpt llama gemini mistral copilot
python java javascript typescript kotlin swift rust golang ruby perl php scala haskell
linux windows ubuntu debian android ios macos chrome firefox safari edge docker kubernetes
azure aws google microsoft apple amazon meta netflix spotify tesla samsung sony nvidia intel
excel word powerpoint outlook teams slack zoom discord github gitlab jira notion figma
kingdom states republic union empire dynasty revolution war wars army navy force forces
north south east west central upper lower greater new old saint san santa los las el
county city town village district province region state capital metro downtown
day night morning evening week month year years christmas easter halloween thanksgiving
birthday wedding anniversary holiday holidays vacation weekend
street avenue boulevard road lane drive court place terrace way
dear sir madam team hi hello hey thanks thank regards best cheers
pi os inc ltd planning master temple pavilion convention rd
german french english irish welsh scottish dutch roman greek latin persian egyptian viking celtic norse arab arabic hindu buddhist christian
lady queen king lord prince princess saint captain general sergeant detective officer professor
"""

_AMBIGUOUS_FIRST = """
will may mark bill rose grace faith hope joy art max sky summer hunter chase jack frank grant
drew guy ray dean don page lane dale glen forest brook pat sue rob bob sandy holly ivy iris
pearl ruby julia ada crystal amber autumn april june august dawn eve star angel destiny
royal king prince princess duke earl major harmony sterling victor hero miles price young
claude alexa siri cortana jasmine violet lily daisy basil sage rosemary ginger pepper honey
lincoln austin dallas houston denver phoenix paris sydney florence victoria georgia virginia
carolina chelsea brooklyn israel india china jordan kenya asia america elizabeth charlotte
regina adelaide savannah madison mercedes harley morgan aston calvin ralph louis tommy
christian norman scott
london boston chicago miami seattle portland orlando vegas berlin vienna milan naples geneva
kitty misty dusty rusty sunny stormy
"""
NOT_NAMES = frozenset(_NOT_NAMES.split())
# Surnames and given names that ShareGPT also writes in lower case (romanised Hindi, Arabic,
# Chinese, Vietnamese text; short forms): they stay names for ``english_words``.
NAME_WORDS = frozenset(
    ["kumar", "hamza", "talib", "yang", "li", "thi", "tuan", "uma", "luz", "nur", "dan", "ed", "bert", "len", "jo", "sid", "ama", "esi", "das", "dass"]
)
AMBIGUOUS_FIRST = frozenset(_AMBIGUOUS_FIRST.split())

PUBLIC_FIGURES = """
Abraham Lincoln, George Washington, Thomas Jefferson, John Adams, Benjamin Franklin,
Alexander Hamilton, Theodore Roosevelt, Franklin Roosevelt, John Kennedy, Ronald Reagan,
Barack Obama, Donald Trump, Joe Biden, Hillary Clinton, Bill Clinton, George Bush,
Martin Luther, Luther King, Rosa Parks, Nelson Mandela, Mahatma Gandhi, Winston Churchill,
Margaret Thatcher, Queen Elizabeth, Napoleon Bonaparte, Julius Caesar, Joan Arc,
Marie Curie, Albert Einstein, Isaac Newton, Charles Darwin, Galileo Galilei, Nikola Tesla,
Thomas Edison, Stephen Hawking, Richard Feynman, Niels Bohr, Max Planck, Alan Turing,
Ada Lovelace, Grace Hopper, Charles Babbage, John Neumann, Carl Sagan, Rosalind Franklin,
Louis Pasteur, Gregor Mendel, Sigmund Freud, Carl Jung, Karl Marx, Adam Smith, John Keynes,
William Shakespeare, Jane Austen, Charles Dickens, Mark Twain, Ernest Hemingway,
George Orwell, Virginia Woolf, Leo Tolstoy, Fyodor Dostoevsky, Franz Kafka, Oscar Wilde,
Edgar Allan, Allan Poe, Emily Dickinson, Walt Whitman, Maya Angelou, Toni Morrison,
Agatha Christie, Arthur Conan, Conan Doyle, Harry Potter, Sherlock Holmes, Stephen King,
Ludwig Beethoven, Wolfgang Amadeus, Amadeus Mozart, Johann Sebastian, Sebastian Bach,
Leonardo Vinci, Pablo Picasso, Vincent Gogh, Claude Monet, Frida Kahlo, Andy Warhol,
Elvis Presley, Michael Jackson, Taylor Swift, Beyonce Knowles, Bob Dylan, John Lennon,
Paul McCartney, Freddie Mercury, David Bowie, Elton John, Lady Gaga, Justin Bieber,
Michael Jordan, Lebron James, Serena Williams, Roger Federer, Lionel Messi,
Cristiano Ronaldo, Tiger Woods, Usain Bolt, Muhammad Ali, Tom Brady, Kobe Bryant,
Elon Musk, Bill Gates, Steve Jobs, Mark Zuckerberg, Jeff Bezos, Warren Buffett, Sam Altman,
Tim Cook, Satya Nadella, Sundar Pichai, Larry Page, Sergey Brin, Jensen Huang, Linus Torvalds,
Neil Armstrong, Buzz Aldrin, Yuri Gagarin, Amelia Earhart, Christopher Columbus,
Florence Nightingale, Mother Teresa, Pope Francis, Jesus Christ, Walt Disney, Oprah Winfrey,
Tom Hanks, Leonardo DiCaprio, Meryl Streep, Brad Pitt, Angelina Jolie, Will Smith,
Morgan Freeman, Tom Cruise, Keanu Reeves, Julia Roberts, Marilyn Monroe, Charlie Chaplin,
Julia Child, Gordon Ramsay, Anne Frank, Helen Keller, Harriet Tubman, Frederick Douglass,
Malcolm X, Che Guevara, Fidel Castro, Vladimir Putin, Emmanuel Macron, Angela Merkel,
Justin Trudeau, Narendra Modi, Xi Jinping, Kim Jong, Volodymyr Zelensky, Greta Thunberg,
Morgan Stanley, Aston Martin, Harley Davidson, Calvin Klein, Ralph Lauren, Tommy Hilfiger,
Louis Vuitton, Jack Daniels, Charles Schwab, Estee Lauder, Hewlett Packard, Rolls Royce,
Tim Hortons, Mary Kay, Marks Spencer, Johnson Johnson, Ernst Young, Warner Bros,
Santa Clara, Santa Monica, San Jose, San Diego, San Antonio, Santa Barbara, Santa Fe,
Buenos Aires, Costa Rica, Puerto Rico, Hong Kong, Sri Lanka, Tel Aviv, Abu Dhabi,
Kuala Lumpur, Rio Janeiro, Saint Louis, Las Vegas, Los Angeles, Salt Lake, Palo Alto,
Augustus Caesar, Ed Sheeran, Billie Eilish, Kevin Durant, Stephen Curry, Steve Wozniak,
Nova Scotia, Berlin Wall, Palgrave Macmillan, German Shepherd, Oliver Twist, Hermione Granger, Ron Weasley, Tony Stark, Peter Parker, Bruce Wayne, Clark Kent
"""


def public_figures() -> frozenset[str]:
    """``"First Last"`` pairs of :data:`PUBLIC_FIGURES`, as the name rule sees them."""
    return frozenset(p.strip() for p in PUBLIC_FIGURES.replace("\n", " ").split(",") if p.strip())
